-- The BINS declaration of the DOMAIN clause: an ordinal attribute, released as one range.

-- case: BINS with a domain, the context a released range
-- by: age, dept
-- context: "age" >= 30 AND "age" < 50 AND dept IN ('Nursing')
EXPLAIN OUTLIER SELECT salary FROM ages WHERE id = 3
BY age, dept
DOMAIN (age BINS (18, 30, 50, 81), dept IN ('Admin', 'Nursing', 'Surgery'))
USING grubbs WITH (epsilon = 0.5)
-- expect: domains
{"dept": ["Admin", "Nursing", "Surgery"]}
-- expect: bins
{"age": {"edges": [18, 30, 50, 81], "labels": ["[18, 30)", "[30, 50)", "[50, 81]"],
 "ranges": ["\"age\" >= 30 AND \"age\" < 50", "\"age\" >= 18 AND \"age\" < 50", "\"age\" >= 30 AND \"age\" <= 81", "\"age\" IS NOT NULL"]}}
-- expect: population
SELECT salary FROM ages WHERE "age" >= 30 AND "age" < 50 AND dept IN ('Nursing')
-- expect: explanation
SELECT salary FROM ages WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "age", "dept" FROM ages WHERE (id = 3)
-- expect: population rows
[52000.0, 120000.0]
-- expect: record rows
[[120000.0, 34, "Nursing"]]

-- case: BINS alone, infinite ends as strings, the last bin holding the record
-- by: age
-- context: "age" >= 60
EXPLAIN OUTLIER SELECT salary FROM ages WHERE id = 8
DOMAIN (age BINS ('-inf', 30, 60, 'inf')) BY age
-- expect: bins
{"age": {"edges": ["-inf", 30, 60, "inf"], "labels": ["(-inf, 30)", "[30, 60)", "[60, inf)"],
 "ranges": ["\"age\" >= 60", "\"age\" >= 30", "\"age\" IS NOT NULL"]}}
-- expect: population
SELECT salary FROM ages WHERE "age" >= 60
-- expect: explanation
SELECT salary FROM ages WHERE TRUE
-- expect: record
SELECT salary AS "__pcor_metric_0", "age" FROM ages WHERE (id = 8)
-- expect: population rows
[58000.0, 61000.0]
-- expect: record rows
[[61000.0, 81]]
