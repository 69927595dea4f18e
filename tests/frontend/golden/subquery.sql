-- case: a subquery in FROM
-- by: dept, year
-- context: year = 2020
SELECT d.pay FROM (SELECT salary / 1000 AS pay, dept, year FROM staff WHERE year >= 2019) AS d WHERE d.pay > 100
-- expect: population
SELECT d.pay FROM (SELECT (salary / 1000) AS pay, dept, "year" FROM staff WHERE ("year" >= 2019)) AS d WHERE year = 2020
-- expect: explanation
SELECT d.pay FROM (SELECT (salary / 1000) AS pay, dept, "year" FROM staff WHERE ("year" >= 2019)) AS d WHERE TRUE
-- expect: record
SELECT d.pay AS "__pcor_metric_0", "dept", "year" FROM (SELECT (salary / 1000) AS pay, dept, "year" FROM staff WHERE ("year" >= 2019)) AS d WHERE (d.pay > 100)
-- expect: population rows
[41.0, 52.0, 95.0, 250.0]
-- expect: record rows
[[250.0, "Nursing", 2020]]

-- case: GROUP BY inside a subquery of the statement form
-- by: dept
-- context: dept IN ('Nursing', 'Surgery')
EXPLAIN OUTLIER SELECT total FROM (SELECT dept, year, sum(salary) AS total FROM staff GROUP BY dept, year) AS g
WHERE total > 200000 BY dept WITH (search = 'direct')
-- expect: population
SELECT total FROM (SELECT dept, "year", sum(salary) AS total FROM staff GROUP BY dept, "year") AS g WHERE dept IN ('Nursing', 'Surgery')
-- expect: explanation
SELECT total FROM (SELECT dept, "year", sum(salary) AS total FROM staff GROUP BY dept, "year") AS g WHERE TRUE
-- expect: record
SELECT total AS "__pcor_metric_0", "dept" FROM (SELECT dept, "year", sum(salary) AS total FROM staff GROUP BY dept, "year") AS g WHERE (total > 200000)
-- expect: population rows
[50000.0, 90000.0, 95000.0, 302000.0]
-- expect: record rows
[[302000.0, "Nursing"]]

-- case: a subquery in the selector
-- by: dept
-- context: dept = 'Surgery'
SELECT salary FROM staff WHERE salary > (SELECT avg(salary) FROM staff) AND dept <> 'Nursing'
-- expect: population
SELECT salary FROM staff WHERE dept = 'Surgery'
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept" FROM staff WHERE ((salary > (SELECT avg(salary) FROM staff)) AND (dept != 'Nursing'))
-- expect: population rows
[90000.0, 95000.0]
-- expect: record rows
[[90000.0, "Surgery"], [95000.0, "Surgery"]]
