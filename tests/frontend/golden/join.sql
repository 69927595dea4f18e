-- Joins with table aliases: a qualified metric must stay valid in every rewrite.

-- case: inner join on a condition, qualified metric and quoted column with a space
-- by: dept, year, city
-- context: city = 'Oslo' AND dept = 'Nursing'
SELECT s.salary FROM staff AS s JOIN people AS p ON s.id = p.id WHERE p."full name" = 'Gus Grey'
-- expect: population
SELECT s.salary FROM (staff AS s INNER JOIN people AS p ON ((s.id = p.id))) WHERE city = 'Oslo' AND dept = 'Nursing'
-- expect: explanation
SELECT s.salary FROM (staff AS s INNER JOIN people AS p ON ((s.id = p.id))) WHERE TRUE
-- expect: record
SELECT s.salary AS "__pcor_metric_0", "dept", "year", "city" FROM (staff AS s INNER JOIN people AS p ON ((s.id = p.id))) WHERE (p."full name" = 'Gus Grey')
-- expect: population rows
[50000.0, 52000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020, "Oslo"]]

-- case: join with USING and an implicit alias
-- by: dept, city
-- context: city IN ('Rome')
SELECT s.salary FROM staff s JOIN people p USING (id) WHERE p.city = 'Rome' AND s.year = 2020
-- expect: population
SELECT s.salary FROM (staff AS s INNER JOIN people AS p USING (id)) WHERE city IN ('Rome')
-- expect: explanation
SELECT s.salary FROM (staff AS s INNER JOIN people AS p USING (id)) WHERE TRUE
-- expect: record
SELECT s.salary AS "__pcor_metric_0", "dept", "city" FROM (staff AS s INNER JOIN people AS p USING (id)) WHERE ((p.city = 'Rome') AND (s."year" = 2020))
-- expect: population rows
[39000.0, 41000.0, 90000.0, 95000.0]
-- expect: record rows
[[41000.0, "Admin", "Rome"], [95000.0, "Surgery", "Rome"]]

-- case: the statement form: JOIN ... USING (...) is the join's, USING zscore the verifier
-- by: dept, city
-- context: dept = 'Admin'
EXPLAIN OUTLIER SELECT s.salary FROM staff s LEFT JOIN people p USING (id) WHERE s.id = 5 USING zscore WITH (epsilon = 1)
-- expect: population
SELECT s.salary FROM (staff AS s LEFT JOIN people AS p USING (id)) WHERE dept = 'Admin'
-- expect: explanation
SELECT s.salary FROM (staff AS s LEFT JOIN people AS p USING (id)) WHERE TRUE
-- expect: record
SELECT s.salary AS "__pcor_metric_0", "dept", "city" FROM (staff AS s LEFT JOIN people AS p USING (id)) WHERE (s.id = 5)
-- expect: population rows
[39000.0, 40000.0, 41000.0]
-- expect: record rows
[[40000.0, "Admin", "Oslo"]]
