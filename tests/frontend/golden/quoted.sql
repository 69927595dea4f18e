-- Identifiers with spaces and quotes, and values that look like injections (they stay strings).

-- case: quoted table and columns, an injection-looking value in the selector
-- by: "dept's"
-- context: "dept's" = 'a''b'
SELECT "pay rate" FROM "odd ""table""" WHERE "sel""ect" = 'x''); DROP TABLE staff; --'
-- expect: population
SELECT "pay rate" FROM "odd ""table""" WHERE "dept's" = 'a''b'
-- expect: explanation
SELECT "pay rate" FROM "odd ""table""" WHERE TRUE
-- expect: record
SELECT "pay rate" AS "__pcor_metric_0", "dept's" FROM "odd ""table""" WHERE ("sel""ect" = 'x''); DROP TABLE staff; --')
-- expect: population rows
[10.0, 12.0]
-- expect: record rows
[[12.0, "a'b"]]

-- case: the statement form with a quoted BY attribute and a string holding WITH (...)
-- by: "dept's"
-- context: "dept's" IN ('c d')
IDENTIFY ANOMALY SELECT "pay rate" FROM "odd ""table""" WHERE "sel""ect" = 'WITH (epsilon = 1)'
WITH (beta = 2, radius = 5, epsilon = 0.5)
-- expect: population
SELECT "pay rate" FROM "odd ""table""" WHERE "dept's" IN ('c d')
-- expect: explanation
SELECT "pay rate" FROM "odd ""table""" WHERE TRUE
-- expect: record
SELECT "pay rate" AS "__pcor_metric_0", "dept's" FROM "odd ""table""" WHERE ("sel""ect" = 'WITH (epsilon = 1)')
-- expect: population rows
[11.0, 99.0]
-- expect: record rows
[[11.0, "c d"]]
