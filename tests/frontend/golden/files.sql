-- Files in the working directory (the test writes them there).

-- case: a parquet file named as a string
-- by: dept, year
-- context: dept = 'Surgery'
SELECT salary FROM 'staff.parquet' WHERE id = 3
-- expect: population
SELECT salary FROM "staff.parquet" WHERE dept = 'Surgery'
-- expect: explanation
SELECT salary FROM "staff.parquet" WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM "staff.parquet" WHERE (id = 3)
-- expect: population rows
[90000.0, 95000.0]
-- expect: record rows
[[90000.0, "Surgery", 2019]]

-- case: read_parquet with an alias
-- by: dept, year
-- context: year = 2019 AND dept IN ('Admin', 'Nursing')
SELECT f.salary FROM read_parquet('staff.parquet') AS f WHERE f.dept = 'Admin' AND f.salary < 40000
-- expect: population
SELECT f.salary FROM read_parquet('staff.parquet') AS f WHERE year = 2019 AND dept IN ('Admin', 'Nursing')
-- expect: explanation
SELECT f.salary FROM read_parquet('staff.parquet') AS f WHERE TRUE
-- expect: record
SELECT f.salary AS "__pcor_metric_0", "dept", "year" FROM read_parquet('staff.parquet') AS f WHERE ((f.dept = 'Admin') AND (f.salary < 40000))
-- expect: population rows
[39000.0, 40000.0, 50000.0]
-- expect: record rows
[[39000.0, "Admin", 2019]]

-- case: read_csv with named options
-- by: dept
-- context: dept = 'Nursing'
SELECT salary FROM read_csv('staff.csv', header = true) WHERE id = 7
-- expect: population
SELECT salary FROM read_csv('staff.csv', ("header" = true)) WHERE dept = 'Nursing'
-- expect: explanation
SELECT salary FROM read_csv('staff.csv', ("header" = true)) WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept" FROM read_csv('staff.csv', ("header" = true)) WHERE (id = 7)
-- expect: population rows
[50000.0, 52000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing"]]
