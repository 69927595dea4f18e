"""A tiny seeded ENUM table for the benchmark tests (helper module, not a test file).

`tiny(a, b, c, x)`: a ∈ {a0..a3} (a3 declared, absent), b ∈ {b0, b1, b2}, c ∈ {c0, c1};
x is tie-free (normal draws) except record 1, planted at 6.0 in cell (a0, b0, c0), so that
LOF, Grubbs, histogram and z-score all find it an outlier somewhere. 6 free bits: 64
admissible contexts, cheap to enumerate.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

import pcor_sql

ROWS = 360
RECORD = 1


def tiny_con() -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(7)
    con = duckdb.connect()
    con.execute("CREATE TYPE tiny_a AS ENUM ('a0', 'a1', 'a2', 'a3')")
    con.execute("CREATE TYPE tiny_b AS ENUM ('b0', 'b1', 'b2')")
    con.execute("CREATE TYPE tiny_c AS ENUM ('c0', 'c1')")
    con.execute("CREATE TABLE tiny (id INTEGER, a tiny_a, b tiny_b, c tiny_c, x DOUBLE)")
    rows = [(RECORD, "a0", "b0", "c0", 6.0)]
    for i in range(2, ROWS + 1):
        a, b, c = rng.integers(0, 3), rng.integers(0, 3), rng.integers(0, 2)
        rows.append((i, f"a{a}", f"b{b}", f"c{c}", float(rng.normal())))
    con.executemany("INSERT INTO tiny VALUES (?, ?, ?, ?, ?)", rows)
    return con


def tiny_run(con: duckdb.DuckDBPyConnection, verifier: str = "grubbs", **options: Any) -> Any:
    """The planted record's request (options by name) prepared on a fresh Session: an OutlierRun."""
    request = pcor_sql.outlier_request(con, f"SELECT x FROM tiny WHERE id = {RECORD}", verifier=verifier, **options)
    return pcor_sql.Session(con).prepare(request)
