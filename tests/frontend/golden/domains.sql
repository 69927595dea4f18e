-- The DOMAIN clause: declared domains in the statement, with values the data does not hold.

-- case: DOMAIN after BY, strings and numbers
-- by: dept, year
-- context: dept IN ('Nursing', 'Radiology') AND year IN (2020, 2021)
EXPLAIN OUTLIER SELECT salary FROM staff WHERE id = 7
BY dept, year
DOMAIN (dept IN ('Admin', 'Nursing', 'Surgery', 'Radiology'), year IN (2019, 2020, 2021))
USING grubbs WITH (epsilon = 0.5)
-- expect: domains
{"dept": ["Admin", "Nursing", "Surgery", "Radiology"], "year": [2019, 2020, 2021]}
-- expect: population
SELECT salary FROM staff WHERE dept IN ('Nursing', 'Radiology') AND year IN (2020, 2021)
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE (id = 7)
-- expect: population rows
[52000.0, 250000.0]
-- expect: record rows
[[250000.0, "Nursing", 2020]]

-- case: DOMAIN first, in declared order, keywords in a string selector
-- by: dept, year
-- context: year = 2019
EXPLAIN OUTLIER SELECT salary FROM staff WHERE name = 'x DOMAIN (y) BY z' OR id = 8
DOMAIN (year IN (2020, 2019), dept IN ('Surgery', 'Nursing', 'Admin')) BY dept, year
-- expect: domains
{"year": [2020, 2019], "dept": ["Surgery", "Nursing", "Admin"]}
-- expect: population
SELECT salary FROM staff WHERE year = 2019
-- expect: explanation
SELECT salary FROM staff WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "dept", "year" FROM staff WHERE (("name" = 'x DOMAIN (y) BY z') OR (id = 8))
-- expect: population rows
[39000.0, 40000.0, 50000.0, 90000.0]
-- expect: record rows
[[39000.0, "Admin", 2019]]
