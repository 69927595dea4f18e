"""The two-scan window query (`pcor_sql.backends.spark_windows`) against the one-query
`cell_windows` it replaces, run on DuckDB (the text is DuckDB SQL; Spark runs it after the
dialect rewrite, compared on Spark in tests/backends/test_spark.py): the same rows on
tie-heavy data, V's own copies included, and what it reads does not grow with the table."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.backends.spark_windows import TwoScanWindowReader, two_scan_windows
from pcor_sql.errors import InternalError
from pcor_sql.sqltext.build import cell_windows


def windows_rows(table, depth: int) -> list[tuple]:
    """Rows in a canonical order; `distinct_side` as the only thing callers read of it: > depth."""
    rows = sorted(zip(*(c.to_pylist() for c in table.columns)))
    return [(*r[:-2], min(r[-2], depth + 1), r[-1]) for r in rows]


def make_table(con: duckdb.DuckDBPyConnection, values: list[float], cells: list[int]) -> None:
    con.execute("DROP TABLE IF EXISTS t")
    con.execute("CREATE TABLE t (g VARCHAR, h INTEGER, v DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(f"g{c % 3}", c // 3, x) for x, c in zip(values, cells)])


def run_on(con: duckdb.DuckDBPyConnection):
    return lambda sql: con.sql(sql).to_arrow_table()


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    yield c
    c.close()


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 7.0, -3.0, 1e-300, 1e300, -1e300]) | st.floats(-50, 50),
                    min_size=1, max_size=120),
    data=st.data(),
    depth=st.integers(1, 6),
    restrict=st.booleans(),
)
def test_two_scans_give_the_one_query_rows_on_tie_heavy_data(con, values, data, depth, restrict):
    cells = data.draw(st.lists(st.integers(0, 5), min_size=len(values), max_size=len(values)))
    v = data.draw(st.sampled_from(values) | st.floats(-60, 60))  # V's own value (with its copies) or any point
    make_table(con, values, cells)
    where = "g = 'g1'" if restrict else None
    run = run_on(con)
    old = run(cell_windows(["g", "h"], "v", "t", v, depth, where))
    new, queries, pulled = two_scan_windows(run, ["g", "h"], "v", "t", v, depth, where)
    assert windows_rows(new, depth) == windows_rows(old, depth)
    assert queries >= 1 and pulled >= new.num_rows
    # Some cells only, listed (as the reader deepens them): those cells' rows of the same query.
    listed = [("g0", 0), ("g2", 1)]
    new, _, _ = two_scan_windows(run, ["g", "h"], "v", "t", v, depth, None, listed)
    assert windows_rows(new, depth) == [r for r in windows_rows(old if where is None else run(
        cell_windows(["g", "h"], "v", "t", v, depth)), depth) if tuple(r[:2]) in listed]


@pytest.mark.parametrize("plain_cells", [0, 1, 3])
def test_many_copies_are_read_again_until_depth_values_are_known(con, plain_cells):
    # Cell g0: 500 copies of 1.0 above v = 0, then 3, 5, 6 once each: the histogram's first
    # cut-off (distance ≤ 2^(1/4)) holds 8·depth rows but one distinct value, so the side is read again —
    # alone (by a predicate naming its cell) when most cells are fine, else with all of them.
    values = [1.0] * 500 + [3.0, 5.0, 6.0] + [0.0] * 3 + [-1.0] * 40
    cells = [0] * len(values)
    for c in range(1, plain_cells + 1):
        values += [0.25 * i - 4 for i in range(40)]
        cells += [c] * 40
    make_table(con, values, cells)
    run = run_on(con)
    new, _, _ = two_scan_windows(run, ["g", "h"], "v", "t", 0.0, 1)
    assert windows_rows(new, 1) == windows_rows(run(cell_windows(["g", "h"], "v", "t", 0.0, 1)), 1)
    new, queries, _ = two_scan_windows(run, ["g", "h"], "v", "t", 0.0, 3)
    assert windows_rows(new, 3) == windows_rows(run(cell_windows(["g", "h"], "v", "t", 0.0, 3)), 3)
    by_side = {(r[2], r[3]) for r in windows_rows(new, 3) if r[:2] == ("g0", 0)}  # (value, n) of cell 0
    assert {(1.0, 500), (3.0, 1), (5.0, 1), (0.0, 3), (-1.0, 40)} == by_side  # 6 is not among the 3 nearest


def test_what_comes_back_does_not_grow_with_the_table(con):
    rng = np.random.default_rng(3)
    pulled = []
    for n in (2_000, 20_000):
        con.execute("DROP TABLE IF EXISTS t")
        con.execute("CREATE TABLE t AS SELECT 'g' || (i % 3) AS g, (i // 3) % 2 AS h, v FROM "
                    "(SELECT unnest(range(?)) AS i, unnest(?) AS v)", [n, rng.normal(50, 10, n).round(2).tolist()])
        table, _, rows = two_scan_windows(run_on(con), ["g", "h"], "v", "t", 50.0, 16)
        assert table.num_rows <= 6 * (2 * 16 + 1)
        pulled.append(rows)
    assert pulled[1] <= 6 * (2 * 16 + 1) * 2


def test_the_reader_refuses_a_query_it_does_not_answer(con):
    make_table(con, [1.0, 2.0, 3.0], [0, 1, 2])
    from pcor_sql.core.space import Attribute
    from pcor_sql.engine.schema import Schema

    schema = Schema("t", "v", (Attribute("g", ("g0", "g1", "g2")), Attribute("h", (0,))))
    coords = np.array([[0, 0], [1, 0], [2, 0]])
    reader = TwoScanWindowReader(run_on(con), schema, coords, np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    w = reader.window(2.0)
    assert sorted(w.values.tolist()) == [1.0, 2.0, 3.0] and reader.queries == 1
    reader._pending = (2.0, np.array([4, 4, 4]), None)
    with pytest.raises(InternalError, match="two-scan"):
        reader._read("SELECT 1")
