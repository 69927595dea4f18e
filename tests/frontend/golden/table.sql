-- Plain tables, with selectors that mix IN, AND, OR and strings holding SQL keywords.

-- case: one record by id
-- by: dept, year
-- context: dept IN ('Nursing', 'Surgery') AND year = 2020
SELECT salary FROM staff WHERE id = 7
-- expect: population
SELECT salary FROM staff WHERE dept IN ('Nursing', 'Surgery') AND year = 2020
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE (id = 7)
-- expect: population rows
[52000.0, 95000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020]]

-- case: keywords inside a string selector
-- by: dept, year
-- context: dept = 'Admin'
SELECT salary FROM staff WHERE name = 'it''s WITH (x) BY y'
-- expect: population
SELECT salary FROM staff WHERE dept = 'Admin'
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE ("name" = 'it''s WITH (x) BY y')
-- expect: population rows
[39000.0, 40000.0, 41000.0]
-- expect: record rows
[[39000.0, "Admin", 2019]]

-- case: IN, AND and OR in the selector
-- by: dept, year
-- context: year IN (2019)
SELECT salary FROM staff WHERE dept IN ('Nursing', 'Admin') AND (year = 2020 OR name LIKE '%WITH%')
-- expect: population
SELECT salary FROM staff WHERE year IN (2019)
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE ((dept IN ('Nursing', 'Admin')) AND (("year" = 2020) OR ("name" ~~ '%WITH%')))
-- expect: population rows
[39000.0, 40000.0, 50000.0, 90000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020], [39000.0, "Admin", 2019], [41000.0, "Admin", 2020], [52000.0, "Nursing", 2020]]

-- case: no selector asks about every row
-- by: dept
-- context: dept IN ('Surgery')
SELECT salary FROM staff
-- expect: population
SELECT salary FROM staff WHERE dept IN ('Surgery')
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept" FROM staff
-- expect: population rows
[90000.0, 95000.0]
-- expect: record rows
[[250000.0, "Nursing"], [39000.0, "Admin"], [40000.0, "Admin"], [41000.0, "Admin"], [50000.0, "Nursing"], [52000.0, "Nursing"], [90000.0, "Surgery"], [95000.0, "Surgery"]]

-- case: an aliased expression the selector refers to
-- by: dept, year
-- context: dept = 'Nursing'
SELECT salary / 1000 AS k FROM staff WHERE k > 200
-- expect: population
SELECT (salary / 1000) AS "k" FROM staff WHERE dept = 'Nursing'
-- expect: explanation
SELECT (salary / 1000) AS "k" FROM staff WHERE TRUE
-- expect: record
SELECT (salary / 1000) AS "k", "dept", "year" FROM staff WHERE (k > 200)
-- expect: population rows
[50.0, 52.0, 250.0]
-- expect: record rows
[[250.0, "Nursing", 2020]]

-- case: the statement form, with clause keywords inside the SELECT's string
-- by: dept, year
-- context: dept IN ('Nursing') AND year IN (2019, 2020)
EXPLAIN OUTLIER SELECT salary FROM staff WHERE name <> 'x USING lof WITH (epsilon = 9) BY z' AND id = 7
BY dept, year USING lof(k = 3, threshold = 1.5) WITH (epsilon = 0.2, search = 'bfs', seed = 7)
-- expect: population
SELECT salary FROM staff WHERE dept IN ('Nursing') AND year IN (2019, 2020)
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE (("name" != 'x USING lof WITH (epsilon = 9) BY z') AND (id = 7))
-- expect: population rows
[50000.0, 52000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020]]
