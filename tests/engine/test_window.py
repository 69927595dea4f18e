"""Per-cell windows (`pcor_sql.engine.window`) answer exactly what the sorted index answers:
the same `between` arrays, the same `count_between` counts, LOF scores equal within the
tolerance of summation order (both rules for duplicates; verdicts equal unless the score is
that close to the threshold) and the same histogram verdicts, for every context — checked on
DuckDB, which runs the same window SQL as Spark. Small starting depths force the deepening
and range-count paths."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary, record_cell
from pcor_sql.engine.window import WindowReader
from pcor_sql.errors import UserError
from tests.core.verifiers.lof_reference import RTOL, brute_lof

DEPTS = ("a", "b", "c", "d")
ROLES = ("x", "y", "z")


@pytest.fixture(scope="module")
def table():
    con = duckdb.connect()
    rng = np.random.default_rng(3)
    n = 3000
    dept = rng.choice(DEPTS[:3], n)  # d is declared, never present
    role = rng.choice(ROLES, n)
    # Ties (rounded values), a heavy tail and one far value per cell.
    salary = np.round(rng.lognormal(3.0, 0.6, n), 1)
    salary[:9] = [400.0, 350.5, 0.1, 200.0, 200.0, 200.0, 51.3, 51.3, 51.3]
    con.execute("CREATE TABLE t (id INTEGER, dept VARCHAR, role VARCHAR, salary DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                    [(i, str(d), str(r), float(s)) for i, (d, r, s) in enumerate(zip(dept, role, salary))])
    con.execute("INSERT INTO t VALUES (-1, NULL, 'x', 5.0)")  # in no population
    schema = resolve_schema(con, "t", "salary", by=["dept", "role"], domains={"dept": list(DEPTS), "role": list(ROLES)})
    yield con, schema
    con.close()


def _summaries(con, schema, depth):
    exact = build_summary(con, schema, with_values=True)
    windowed = build_summary(con, schema)
    windowed.windows = WindowReader(lambda sql: con.sql(sql).to_arrow_table(), schema, windowed.coords,
                                    windowed.vmin, windowed.vmax, start_depth=depth)
    return exact, windowed


def _record(con, schema, rid):
    row = con.execute("SELECT * FROM t WHERE id = ?", [rid]).fetchall()[0]
    record = dict(zip(["id", "dept", "role", "salary"], row))
    return record, float(record["salary"])


@pytest.mark.parametrize("depth", [1, 3, 128])
def test_every_context_gets_the_same_values_counts_and_verdicts(table, depth):
    con, schema = table
    exact, windowed = _summaries(con, schema, depth)
    lofs, hist = (Lof(k=5, threshold=1.2), Lof(k=5, threshold=1.2, duplicates="plain")), Histogram(rel=0.02)
    for rid in (0, 2, 6, 100):
        record, v = _record(con, schema, rid)
        space = ContextSpace(schema.attributes, record_cell(schema, record))
        for word in range(1 << len(space.free_bits)):
            mask = space.from_free(word)
            a = exact.population(exact.member(space, mask), v)
            b = windowed.population(windowed.member(space, mask), v)
            assert (a.n, a.min, a.max) == (b.n, b.min, b.max)
            for lo, hi in ((v - 3, v + 3), (v, v), (a.min, v), (v - 0.05, a.max), (a.min, a.max)):
                assert np.array_equal(a.between(lo, hi), b.between(lo, hi))
                for closed in (True, False):
                    assert a.count_between(lo, hi, closed) == b.count_between(lo, hi, closed)
            for rule_lof in lofs:
                near_threshold = _same_score(rule_lof.score(a), rule_lof.score(b), rule_lof)
                assert near_threshold or rule_lof.check(a) == rule_lof.check(b)
            assert hist.check(a) == hist.check(b)


def _same_score(got: float, want: float, lof: Lof) -> bool:
    """Assert two LOF scores are equal within RTOL (tests/core/verifiers/lof_reference.py: the
    bound on summation order); return whether they are that close to the threshold, where the
    verdicts may then differ without either being wrong."""
    if math.isnan(want):
        assert math.isnan(got)
        return False
    assert math.isclose(got, want, rel_tol=RTOL), (got, want, lof)
    return math.isclose(want, lof.threshold, rel_tol=RTOL)


@pytest.mark.parametrize("duplicates", ["distinct", "plain"])
def test_window_path_equals_the_brute_force_reference_on_random_contexts(table, duplicates):
    con, schema = table
    exact, windowed = _cached(con, schema)
    rng = np.random.default_rng(41)
    lof = Lof(k=int(rng.choice([3, 10, 20])), threshold=1.3, duplicates=duplicates)
    flagged = 0
    for rid in (0, 1, 2, 6, 8, 77, 300):
        record, v = _record(con, schema, rid)
        space = ContextSpace(schema.attributes, record_cell(schema, record))
        for word in rng.integers(0, 1 << len(space.free_bits), size=6):
            mask = space.from_free(int(word))
            values = exact.population(exact.member(space, mask), v).values()
            want = brute_lof(values, int(np.searchsorted(values, v)), lof.k, duplicates)
            pop = windowed.population(windowed.member(space, mask), v)
            near_threshold = _same_score(lof.score(pop), want, lof)
            assert near_threshold or lof.check(pop) == (want > lof.threshold)
            flagged += want > lof.threshold
    assert flagged > 0  # both verdicts occur


@settings(max_examples=60, deadline=None)
@given(lo=st.floats(-5, 500), width=st.floats(0, 400), closed=st.booleans(), rid=st.sampled_from([0, 1, 2, 7, 50]),
       word=st.integers(0, 63))
def test_any_interval_counts_like_the_sorted_index(table, lo, width, closed, rid, word):
    con, schema = table
    exact, windowed = _cached(con, schema)
    record, v = _record(con, schema, rid)
    space = ContextSpace(schema.attributes, record_cell(schema, record))
    mask = space.from_free(word % (1 << len(space.free_bits)))
    a = exact.population(exact.member(space, mask), v)
    b = windowed.population(windowed.member(space, mask), v)
    assert a.count_between(lo, lo + width, closed) == b.count_between(lo, lo + width, closed)


_CACHE: dict = {}


def _cached(con, schema):
    if "s" not in _CACHE:
        _CACHE["s"] = _summaries(con, schema, 2)
    return _CACHE["s"]


def test_reads_stay_within_cells_times_window_and_python_verifiers_are_refused(table):
    con, schema = table
    _, windowed = _summaries(con, schema, 4)
    record, v = _record(con, schema, 5)
    space = ContextSpace(schema.attributes, record_cell(schema, record))
    pop = windowed.population(windowed.member(space, space.v_mask), v)
    pop.count_between(v - 1, v + 1, True)
    reader = windowed.windows
    assert reader.queries == 1 and reader.rows_read <= len(windowed.count) * (2 * 4 + 1)
    with pytest.raises(UserError, match="every value"):
        pop.values()


@pytest.mark.parametrize("method, known", [("around", lambda values: values), ("distinct_around", np.unique)])
def test_around_holds_count_values_on_each_side_or_reaches_the_extremes(table, method, known):
    """`around` counts rows, `distinct_around` distinct values (LOF's distinct rule sizes its
    windows with it: counted in rows, a tied metric's windows were read again and again)."""
    con, schema = table
    exact, windowed = _summaries(con, schema, 2)
    for rid in (0, 2, 4, 6):
        record, v = _record(con, schema, rid)
        space = ContextSpace(schema.attributes, record_cell(schema, record))
        for word in (0, 5, (1 << len(space.free_bits)) - 1):
            mask = space.from_free(word)
            ref = exact.population(exact.member(space, mask), v)
            pop = windowed.population(windowed.member(space, mask), v)
            values = known(ref.between(ref.min, ref.max))
            for count in (1, 7, 40, 10_000):
                a, b = getattr(pop, method)(count)
                assert a <= v <= b
                below, above = values[(values >= a) & (values < v)], values[(values > v) & (values <= b)]
                assert below.size >= count or a <= ref.min
                assert above.size >= count or b >= ref.max
                # the nearest ones: one value fewer would not hold `count` (ties aside)
                if below.size >= count and a > ref.min:
                    assert np.count_nonzero((values > a) & (values < v)) < count
                if method == "distinct_around" and above.size >= count and b < ref.max:
                    assert np.count_nonzero((values < b) & (values > v)) < count
