"""`build_summary(..., with_values=True)`: one GROUP BY gives the moments and the per-cell sorted
runs, with the same populations, verdicts and errors as the GROUP BY summary."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.datasets import load_dataset
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.engine.summary import SummaryPopulation, build_summary, record_cell
from pcor_sql.errors import UserError
from pcor_sql.sqltext.build import group_by_cells
from tests.engine.query_log import statements_run
from tests.engine.test_summary import make_table


@pytest.fixture(scope="module")
def salaries():
    con = duckdb.connect()
    load_dataset(con, "salaries")
    yield con, resolve_schema(con, "salaries", '"salary"')
    con.close()


def test_with_values_summary_runs_one_statement(salaries):
    con, schema = salaries
    summary, statements = statements_run(con, lambda: build_summary(con, schema, with_values=True))
    # salaries' attributes are ENUMs: one flat scan, partitioned by a counting sort (no GROUP BY);
    # before it, the build reads DuckDB's `threads` setting (how many threads it may use).
    assert statements[0] == "SELECT system.main.current_setting('threads')", statements
    assert len(statements) == 2 and "GROUP BY" not in statements[1], statements
    _, later = statements_run(con, summary.runs)
    assert later == []
    lazy = build_summary(con, schema)
    _, loaded = statements_run(con, lazy.runs)
    assert len(loaded) == 2  # the lazy path still reads the values on first use (and the setting)


def _cell_moments(summary):
    """cell coords → (n, mean, population variance, min, max), recovered from the centred sums."""
    out = {}
    for i, cell in enumerate(summary.coords.tolist()):
        n = summary.count[i]
        d = summary.s1[i] / n
        out[tuple(cell)] = (n, summary.shift + d, summary.s2[i] / n - d * d, summary.vmin[i], summary.vmax[i])
    return out


def test_moments_equal_duckdbs_and_populations_are_identical(salaries):
    con, schema = salaries
    ordered = build_summary(con, schema, with_values=True)
    duck = {}
    for row in con.execute(group_by_cells(schema.names, schema.metric_sql, schema.relation_sql)).fetchall():
        cell = tuple(a.domain.index(value) for a, value in zip(schema.attributes, row))
        duck[cell] = (row[-6], row[-4], row[-3], row[-2], row[-1])  # n, mean, var, lo, hi
    mine = _cell_moments(ordered)
    assert mine.keys() == duck.keys()
    for cell, (n, mean, var, lo, hi) in duck.items():
        got = mine[cell]
        assert (got[0], got[3], got[4]) == (n, lo, hi)
        assert got[1] == pytest.approx(mean, rel=1e-9)
        assert got[2] == pytest.approx(var, rel=1e-9, abs=1e-9 * mean * mean * 1e-6)
    grouped = build_summary(con, schema)
    space = ContextSpace(schema.attributes, tuple(ordered.coords[0]))  # a cell that holds rows
    rng = np.random.default_rng(3)
    for _ in range(60):
        mask = space.from_free(int(rng.integers(0, space.n_admissible)))
        p = SummaryPopulation.of(grouped, grouped.member(space, mask), 1e5)
        q = SummaryPopulation.of(ordered, ordered.member(space, mask), 1e5)
        assert p.n > 0
        assert (p.n, p.min, p.max) == (q.n, q.min, q.max)
        assert q.mean == pytest.approx(p.mean, rel=1e-9) and q.m2 == pytest.approx(p.m2, rel=1e-9)
        np.testing.assert_array_equal(p.values(), q.values())


@pytest.mark.parametrize("verifier", ["lof", "histogram", "grubbs", "zscore"])
@pytest.mark.parametrize("rank", [0, 3])  # the largest salary and the 4th: valid and invalid contexts
def test_verdicts_are_identical(verifier, rank):
    con = duckdb.connect()
    make_table(con, n=600, seed=4)
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year"])
    job, year, v = con.execute(f"SELECT job, year, salary FROM s ORDER BY salary DESC LIMIT 1 OFFSET {rank}").fetchall()[0]
    space = ContextSpace(schema.attributes, record_cell(schema, {"job": job, "year": year}))
    results = []
    for with_values in (False, True):
        summary = build_summary(con, schema, with_values=with_values)
        masks, utilities = Evaluator(con, summary, space, v, default_registry().make(verifier)).coe(1 << 20)
        results.append(([int(m) for m in masks], utilities.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "rows, match",
    [
        ([("a", 1.0), ("b", None)], "NULL, NaN or infinite in 1 rows"),
        ([("a", 1.0), (None, float("nan")), ("a", float("inf"))], "NULL, NaN or infinite in 2 rows"),
        ([("a", 1.0), ("zz", 2.0)], "'zz', which is outside its declared domain"),
        ([(None, 1.0)], "no row has a non-NULL value"),
    ],
)
def test_errors_are_the_same(rows, match):
    con = duckdb.connect()
    con.execute("CREATE TABLE t(g VARCHAR, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    schema = resolve_schema(con, "t", "x", domains={"g": ["a", "b"]})
    messages = []
    for with_values in (False, True):
        with pytest.raises(UserError, match=match) as err:
            build_summary(con, schema, with_values=with_values)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_rows_with_a_null_attribute_are_left_out_of_both():
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a', 'b', 'unused')")
    con.execute("CREATE TABLE t(g k, h INTEGER, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [("a", 1, 3.0), ("b", None, 1.0), (None, 2, 0.5), ("a", 2, 2.0)])
    schema = resolve_schema(con, "t", "x", domains={"g": ["a", "b"], "h": [1, 2]})
    summary = build_summary(con, schema, with_values=True)
    assert summary.n_rows == 2
    runs = summary.runs()
    assert runs.n_cells == 2 and sorted(runs.values.tolist()) == [2.0, 3.0]
    assert {tuple(summary.coords[c].tolist()): runs.cell_values(c).tolist() for c in range(2)} == {
        (0, 1): [2.0], (0, 0): [3.0]}


def test_cell_lists_become_one_writable_array_in_every_layout():
    import pyarrow as pa

    from pcor_sql.engine.summary import _lists

    one = pa.table({"vs": pa.array([[3.0, 1.0], [2.0]], type=pa.list_(pa.float64()))})
    sliced = pa.table({"vs": pa.array([[9.0], [3.0, 1.0], [2.0]], type=pa.list_(pa.float64())).slice(1)})
    chunked = pa.table({"vs": pa.chunked_array([[[3.0, 1.0]], [[2.0]]], type=pa.list_(pa.float64()))})
    with_null = pa.table({"vs": pa.array([[3.0, None], [2.0]], type=pa.list_(pa.float64()))})
    for table in (one, sliced, chunked):
        values, lengths = _lists(table)
        assert values.tolist() == [3.0, 1.0, 2.0] and lengths.tolist() == [2, 1]
        values[:2].sort()  # in place: the Arrow buffer itself when there is one chunk
        assert values.tolist() == [1.0, 3.0, 2.0]
    values, _ = _lists(with_null)
    assert values[0] == 3.0 and np.isnan(values[1])  # NULL becomes NaN, which the metric check counts
