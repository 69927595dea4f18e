"""The counting-sort summary (`engine.counting_runs`) against the GROUP BY that lists each
cell's values: the same cells, the same sorted runs and per-cell moments bit for bit, the same
errors, on ENUM tables of one batch and of several, and past 16-bit keys (90,000 cells) the same
verdicts on thousands of contexts; other attribute types keep the GROUP BY."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pcor_sql.engine.summary as summary_module
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.counting_runs import MAX_KEYS, read_cells
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary, record_cell
from pcor_sql.errors import UserError


def grouped_summary(con, schema, monkeypatch):
    """The with-values summary as the GROUP BY path builds it."""
    with monkeypatch.context() as m:
        m.setattr(summary_module, "read_cells", lambda *_a: None)
        return build_summary(con, schema, with_values=True)


def by_cell(summary):
    """cell coords → (its sorted run, count, s1, s2, lo, hi) — per cell, whatever the cell order."""
    runs = summary.runs()
    return {tuple(c): (runs.cell_values(i).tolist(), *(float(a[i]) for a in (
        summary.count, summary.vmin, summary.vmax)))
        for i, c in enumerate(summary.coords.tolist())}


def moments_by_cell(summary):
    """cell coords → (count, mean, population variance) recovered exactly as the summary stores them."""
    out = {}
    for i, c in enumerate(summary.coords.tolist()):
        n = summary.count[i]
        out[tuple(c)] = (int(n), summary.s1[i] / n + summary.shift, summary.s2[i] / n - (summary.s1[i] / n) ** 2)
    return out


def enum_table(con, rows, labels=("a", "b", "c", "unused"), domain=None):
    con.execute("DROP TABLE IF EXISTS t")
    con.execute("DROP TYPE IF EXISTS g_t")
    con.execute(f"CREATE TYPE g_t AS ENUM ({', '.join(repr(x) for x in labels)})")
    con.execute("CREATE TABLE t(g g_t, h g_t, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return resolve_schema(con, "t", "x", domains=domain)


@pytest.fixture(scope="module")
def shared_con():
    """One connection for a property's examples (each replaces table t and its type): a
    connection costs 50-130 ms on a loaded machine, more than an example."""
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.sampled_from(["a", "b", "c"]),
                               st.sampled_from([0.0, 1.0, 2.5, -3.0]) | st.floats(-1e6, 1e6)), min_size=1, max_size=80))
def test_the_same_runs_and_moments_as_the_group_by(shared_con, rows):
    with pytest.MonkeyPatch.context() as monkeypatch:
        con = shared_con
        schema = enum_table(con, rows)
        if all(r[0] is None for r in rows):
            with pytest.raises(UserError, match="no row has a non-NULL value"):
                build_summary(con, schema, with_values=True)
            return
        counted, grouped = build_summary(con, schema, with_values=True), grouped_summary(con, schema, monkeypatch)
        assert by_cell(counted) == by_cell(grouped)
        mc, mg = moments_by_cell(counted), moments_by_cell(grouped)
        assert mc.keys() == mg.keys()
        for cell in mc:
            assert mc[cell][0] == mg[cell][0]
            assert mc[cell][1] == pytest.approx(mg[cell][1], rel=1e-12, abs=1e-9)
        # Cells in key order (domain indices), so the summary is the same whatever DuckDB's hash order.
        assert counted.coords.tolist() == sorted(counted.coords.tolist())


def test_several_batches_and_ties(monkeypatch):
    con = duckdb.connect()
    con.execute("CREATE TYPE a_t AS ENUM ('p', 'q', 'r')")
    con.execute("CREATE TYPE b_t AS ENUM ('0', '1', '2', '3', '4')")
    con.execute("CREATE TABLE big AS SELECT (['p', 'q', 'r'][(1 + hash(i) % 3)::BIGINT])::a_t AS a, "
                "((hash(i * 7) % 5)::VARCHAR)::b_t AS b, round((hash(i * 13) % 100000) / 997.0, 1) AS x "
                "FROM range(300000) t(i)")
    schema = resolve_schema(con, "big", "x")
    rows = read_cells(con, schema)
    assert rows is not None and len(rows.values) >= 2  # DuckDB returns several record batches
    counted, grouped = build_summary(con, schema, with_values=True), grouped_summary(con, schema, monkeypatch)
    assert counted.n_rows == 300000 and by_cell(counted) == by_cell(grouped)


def test_more_cells_than_one_counting_digit(monkeypatch):
    # 80 × 60 = 4,800 possible cells (past the 4,096 keys Arrow's counting sort took in one pass,
    # before the build ran in DuckDB's threads); rows with a NULL attribute are left out.
    con = duckdb.connect()
    con.execute(f"CREATE TYPE e80 AS ENUM ({', '.join(repr(f'a{i}') for i in range(80))})")
    con.execute(f"CREATE TYPE e60 AS ENUM ({', '.join(repr(f'b{i}') for i in range(60))})")
    con.execute("CREATE TABLE m AS SELECT CASE WHEN i % 97 = 0 THEN NULL ELSE ('a' || (hash(i) % 80))::e80 END AS a, "
                "('b' || (hash(i * 3) % 60))::e60 AS b, (hash(i * 5) % 1000) / 7.0 AS x FROM range(40000) t(i)")
    schema = resolve_schema(con, "m", "x")
    counted, grouped = build_summary(con, schema, with_values=True), grouped_summary(con, schema, monkeypatch)
    assert len(counted.count) > 4096 and counted.n_rows == 40000 - 413
    assert by_cell(counted) == by_cell(grouped)


@pytest.mark.parametrize(
    "rows, domain, match",
    [
        ([("a", "a", 1.0), ("b", "a", None)], None, "NULL, NaN or infinite in 1 rows"),
        ([("a", "a", 1.0), (None, "b", float("nan")), ("a", "c", float("inf"))], None, "NULL, NaN or infinite in 2 rows"),
        ([("a", "a", 1.0), ("c", "b", 2.0)], {"g": ["a", "b"], "h": ["a", "b", "c"]}, "'c', which is outside"),
    ],
)
def test_the_same_errors(rows, domain, match, monkeypatch):
    con = duckdb.connect()
    schema = enum_table(con, rows, domain=domain)
    messages = []
    for build in (lambda: build_summary(con, schema, with_values=True), lambda: grouped_summary(con, schema, monkeypatch)):
        with pytest.raises(UserError, match=match) as err:
            build()
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_other_attribute_types_and_many_cells_keep_the_group_by():
    con = duckdb.connect()
    con.execute("CREATE TABLE v(g VARCHAR, x DOUBLE)")
    con.execute("INSERT INTO v VALUES ('a', 1.0), ('b', 2.0)")
    assert read_cells(con, resolve_schema(con, "v", "x", domains={"g": ["a", "b"]})) is None
    labels = ", ".join(f"'l{i}'" for i in range(300))
    con.execute(f"CREATE TYPE wide AS ENUM ({labels})")
    con.execute("CREATE TABLE w(a wide, b wide, c wide, x DOUBLE)")
    con.execute("INSERT INTO w VALUES ('l1', 'l2', 'l3', 1.0)")
    schema = resolve_schema(con, "w", "x")
    assert 300**3 > MAX_KEYS and read_cells(con, schema) is None
    assert build_summary(con, schema, with_values=True).runs().values.tolist() == [1.0]


WIDE = (("a", 300), ("b", 15), ("c", 20))  # 90,000 cells: past 16-bit keys, as the births shape's 85,680


@pytest.fixture(scope="module")
def past_16_bits(shared_con):
    """Both summaries of an ENUM table of `WIDE` cells (rows in several record batches, a NULL
    `a` every 101st row, an integer metric full of ties, id 0 far out) and the record's space."""
    con = shared_con
    for name, size in WIDE:
        con.execute(f"CREATE TYPE {name}_w AS ENUM ({', '.join(repr(f'{name}{j}') for j in range(size))})")
    con.execute("CREATE TABLE pw AS SELECT i AS id, CASE WHEN i % 101 = 1 THEN NULL ELSE ('a' || hash(i) % 300)::a_w END"
                " AS a, ('b' || hash(i * 3) % 15)::b_w AS b, ('c' || hash(i * 7) % 20)::c_w AS c,"
                " CASE WHEN i = 0 THEN 500.0 ELSE (hash(i * 11) % 40 + hash(i) % 300 // 30)::DOUBLE END AS x"
                " FROM range(200000) t(i)")
    con.execute("UPDATE pw SET a = 'a0', b = 'b0', c = 'c0' WHERE id = 0")
    schema = resolve_schema(con, "pw", "x")
    with pytest.MonkeyPatch.context() as monkeypatch:
        grouped = grouped_summary(con, schema, monkeypatch)
    rows = read_cells(con, schema, 2)
    assert rows is not None and rows.key.dtype == np.uint32 and len(rows.values) >= 2
    counted = build_summary(con, schema, with_values=True)
    space = ContextSpace(schema.attributes, record_cell(schema, {"a": "a0", "b": "b0", "c": "c0"}))
    return counted, grouped, space


def test_past_16_bit_keys_the_same_runs_and_moments_as_the_group_by(past_16_bits):
    counted, grouped, _ = past_16_bits
    assert 300 * 15 * 20 > (1 << 16) and len(counted.count) > 50_000
    assert counted.n_rows == 200000 - len(range(1, 200000, 101))  # rows with a NULL attribute left out
    assert by_cell(counted) == by_cell(grouped)
    mc, mg = moments_by_cell(counted), moments_by_cell(grouped)
    assert all(mc[c][0] == mg[c][0] and mc[c][1] == pytest.approx(mg[c][1], rel=1e-12, abs=1e-9) for c in mg)
    assert counted.coords.tolist() == sorted(counted.coords.tolist())


@pytest.mark.parametrize("verifier", [Lof(), Histogram(), Grubbs(), ZScore()], ids=repr)
def test_past_16_bit_keys_the_same_verdicts_on_thousands_of_contexts(past_16_bits, verifier):
    """The summary a release reads is the one the GROUP BY built, as far as any check can tell:
    the compiled check's verdict and population size on each of them, over random contexts and
    descents from the full context, for the planted value and an ordinary, much-tied one."""
    counted, grouped, space = past_16_bits
    rng = np.random.default_rng(3)
    masks = [space.random_admissible(rng) for _ in range(1500)]
    mask = space.full
    while space.shrink_bits(mask):  # one value less each step, down to V's cell
        masks.append(mask)
        removable = space.shrink_bits(mask)
        mask &= ~(1 << removable[int(rng.integers(len(removable)))])
    verdicts = []
    for v in (500.0, 20.0):
        got, want = compiled_check(counted, space, verifier, v), compiled_check(grouped, space, verifier, v)
        for mask in masks:
            verdict = got(mask)
            assert verdict == want(mask), (verifier, v, mask)
            verdicts.append(verdict[0])
    assert any(verdicts) and not all(verdicts)


def test_runs_read_later_for_a_moments_summary_come_in_its_cell_order(monkeypatch):
    con = duckdb.connect()
    schema = enum_table(con, [("a", "b", 2.0), ("c", "a", 1.0), ("a", "b", -1.0), (None, "c", 5.0), ("b", "c", 0.5)])
    lazy = build_summary(con, schema)  # moments only: the GROUP BY's cell order
    assert by_cell(lazy) == by_cell(grouped_summary(con, schema, monkeypatch))
    runs = lazy.runs()
    assert [runs.cell_values(i).size for i in range(runs.n_cells)] == lazy.count.tolist()
