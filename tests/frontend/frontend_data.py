"""A tiny database for the front-end tests: tables, a view, files, odd identifiers.

Every population the golden files expect was counted by hand from these rows.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

STAFF = [
    # id, name, dept, year, salary
    (1, "Ann Abel", "Nursing", 2019, 50000.0),
    (2, "Bob Burr", "Nursing", 2020, 52000.0),
    (3, "Cid Cole", "Surgery", 2019, 90000.0),
    (4, "Dee Dunn", "Surgery", 2020, 95000.0),
    (5, "Eve East", "Admin", 2019, 40000.0),
    (6, "Fay Fern", "Admin", 2020, 41000.0),
    (7, "Gus Grey", "Nursing", 2020, 250000.0),
    (8, "it's WITH (x) BY y", "Admin", 2019, 39000.0),
]

PEOPLE = [
    # id, full name, city
    (1, "Ann Abel", "Oslo"),
    (2, "Bob Burr", "Oslo"),
    (3, "Cid Cole", "Rome"),
    (4, "Dee Dunn", "Rome"),
    (5, "Eve East", "Oslo"),
    (6, "Fay Fern", "Rome"),
    (7, "Gus Grey", "Oslo"),
    (8, "it's WITH (x) BY y", "Rome"),
]

AGES = [
    # id, age, dept, salary — age is binned in the BINS golden cases (81: on the closed last edge)
    (1, 22, "Admin", 40000.0),
    (2, 25, "Nursing", 45000.0),
    (3, 34, "Nursing", 120000.0),
    (4, 41, "Nursing", 52000.0),
    (5, 47, "Admin", 50000.0),
    (6, 58, "Nursing", 60000.0),
    (7, 63, "Admin", 58000.0),
    (8, 81, "Admin", 61000.0),
]

ODD = [
    # "pay rate", "dept's", "sel""ect"
    (10.0, "a'b", "plain"),
    (12.0, "a'b", "x'); DROP TABLE staff; --"),
    (99.0, "c d", "plain"),
    (11.0, "c d", "WITH (epsilon = 1)"),
]


def make_connection(folder: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the fixture, and staff.parquet / staff.csv in `folder`
    (the tests chdir there so the golden files can name the files relatively)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE staff (id INTEGER, name VARCHAR, dept VARCHAR, year INTEGER, salary DOUBLE)")
    con.executemany("INSERT INTO staff VALUES (?, ?, ?, ?, ?)", STAFF)
    con.execute('CREATE TABLE people (id INTEGER, "full name" VARCHAR, city VARCHAR)')
    con.executemany("INSERT INTO people VALUES (?, ?, ?)", PEOPLE)
    con.execute("CREATE TABLE ages (id INTEGER, age INTEGER, dept VARCHAR, salary DOUBLE)")
    con.executemany("INSERT INTO ages VALUES (?, ?, ?, ?)", AGES)
    con.execute("CREATE VIEW senior AS SELECT id, name, dept, year, salary FROM staff WHERE salary >= 41000")
    con.execute('CREATE TABLE "odd ""table""" ("pay rate" DOUBLE, "dept\'s" VARCHAR, "sel""ect" VARCHAR)')
    con.executemany('INSERT INTO "odd ""table""" VALUES (?, ?, ?)', ODD)
    parquet = (folder / "staff.parquet").as_posix().replace("'", "''")
    csv = (folder / "staff.csv").as_posix().replace("'", "''")
    con.execute(f"COPY staff TO '{parquet}' (FORMAT parquet)")
    con.execute(f"COPY staff TO '{csv}' (HEADER)")
    return con
