-- case: a view
-- by: dept, year
-- context: year = 2020
SELECT salary FROM senior WHERE name = 'Gus Grey'
-- expect: population
SELECT salary FROM senior WHERE year = 2020
-- expect: explanation
SELECT salary FROM senior WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM senior WHERE ("name" = 'Gus Grey')
-- expect: population rows
[41000.0, 52000.0, 95000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020]]

-- case: a schema-qualified view in a statement, lower-case keywords
-- by: dept
-- context: dept IN ('Nursing', 'Admin')
explain outlier select salary from main.senior where id in (6, 7) by dept with (samples = 5)
-- expect: population
SELECT salary FROM main.senior WHERE dept IN ('Nursing', 'Admin')
-- expect: explanation
SELECT salary FROM main.senior WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept" FROM main.senior WHERE (id IN (6, 7))
-- expect: population rows
[41000.0, 50000.0, 52000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing"], [41000.0, "Admin"]]
