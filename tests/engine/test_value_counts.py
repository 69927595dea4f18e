"""Rows per (distinct value, cell) (`pcor_sql.engine.value_counts`): a context's distinct values in
a range with their counts, and windows counted in distinct values, equal to what the sorted
values give — and LOF's distinct rule read through them equal to the reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.lof import local_outlier_factor
from pcor_sql.engine import value_counts
from pcor_sql.engine.summary import SummaryPopulation
from tests.core.verifiers.lof_reference import RTOL, brute_lof
from tests.engine.test_cellruns import member_values, runs_of, summary_of

values_st = st.one_of(st.integers(-12, 12).map(lambda i: i / 4), st.sampled_from([0.0, -0.0, 1e-300, 7.0]))


@st.composite
def cells_and_query(draw):
    cells = draw(st.lists(st.lists(values_st, min_size=1, max_size=25), min_size=1, max_size=6))
    c_v = draw(st.integers(0, len(cells) - 1))
    v = float(draw(st.sampled_from(cells[c_v])))
    member = np.zeros(len(cells), dtype=bool)
    member[draw(st.lists(st.integers(0, len(cells) - 1), max_size=len(cells)))] = True
    member[c_v] = True
    return cells, v, member


@settings(max_examples=200, deadline=None)
@given(cells_and_query(), st.floats(-4, 4), st.floats(0, 8))
def test_distinct_values_and_counts_in_a_range(case, lo, width):
    cells, v, member = case
    runs = runs_of(cells)
    counts = runs.value_counts()
    assert counts is not None  # a few dozen values: far under the cap
    ref = member_values(cells, np.flatnonzero(member))
    for a, b in ((lo, lo + width), (v, v), (min(lo, v), max(lo + width, v))):
        got_values, got_counts = counts.between(member, a, b)
        inside = ref[(ref >= a) & (ref <= b)]
        want_values, want_counts = np.unique(inside, return_counts=True)
        np.testing.assert_array_equal(got_values, want_values)
        np.testing.assert_array_equal(got_counts, want_counts.astype(np.float64))


@settings(max_examples=200, deadline=None)
@given(cells_and_query(), st.integers(1, 30))
def test_around_holds_count_distinct_values_on_each_side(case, count):
    cells, v, member = case
    counts = runs_of(cells).value_counts()
    ref = np.unique(member_values(cells, np.flatnonzero(member)))
    a, b = counts.around(member, v, count, float(ref[0]), float(ref[-1]))
    assert a <= v <= b
    below, above = ref[(ref >= a) & (ref < v)], ref[(ref > v) & (ref <= b)]
    assert below.size == count or (a == ref[0] and below.size < count)
    assert above.size == count or (b == ref[-1] and above.size < count)


@settings(max_examples=150, deadline=None)
@given(cells_and_query(), st.sampled_from([1, 2, 5, 20]))
def test_lof_distinct_rule_through_value_counts_equals_the_reference(case, k):
    cells, v, member = case
    summary = summary_of(cells)
    pop = SummaryPopulation.of(summary, member, v)
    x = member_values(cells, np.flatnonzero(member))
    got = local_outlier_factor(pop, k)
    assert summary.runs().value_counts() is not None  # the path under test was taken
    if np.unique(x).size < 2:
        assert math.isnan(got)
    else:
        want = brute_lof(x, int(np.searchsorted(x, v)), k)
        assert math.isclose(got, want, rel_tol=RTOL), (got, want)
        assert math.isclose(got, local_outlier_factor(ArrayPopulation(x, v), k), rel_tol=RTOL)


def test_no_index_for_a_metric_with_too_many_distinct_values(monkeypatch):
    monkeypatch.setattr(value_counts, "_MAX_ENTRIES", 100)
    rng = np.random.default_rng(2)
    tie_free = [list(rng.normal(size=40)) for _ in range(4)]  # 160 distinct × 4 cells > 100
    assert runs_of(tie_free).value_counts() is None
    tied = [list(rng.integers(0, 20, size=40).astype(float)) for _ in range(4)]  # ≤ 20 × 4 ≤ 100
    assert runs_of(tied).value_counts() is not None
    # Without the index the distinct rule reads rows, and gets the same number.
    summary = summary_of(tie_free)
    member = np.array([True, False, True, True])
    v = float(tie_free[2][7])
    x = member_values(tie_free, np.flatnonzero(member))
    got = local_outlier_factor(SummaryPopulation.of(summary, member, v), 5)
    assert math.isclose(got, brute_lof(x, int(np.searchsorted(x, v)), 5), rel_tol=RTOL)
