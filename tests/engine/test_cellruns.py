"""Per-cell sorted runs and their probes: every range count, window and `around` pair equals
the plain answer over the member cells' values (hypothesis, with ties, ±0.0 and values at the
probe's own rungs); LOF (both rules for duplicates, within the tolerance of summation order) and
the histogram (counts: exactly) read through them equal the reference."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.histogram import bin_count_of_v
from pcor_sql.core.verifiers.lof import local_outlier_factor
from pcor_sql.engine import cellruns
from pcor_sql.engine.cellruns import CellRuns, _first_true, gather_segments
from pcor_sql.engine.summary import SummaryPopulation, _summary
from tests.core.verifiers.lof_reference import RTOL


def runs_of(cells: list[list[float]]) -> CellRuns:
    values = np.concatenate([np.sort(np.asarray(c, dtype=np.float64)) for c in cells])
    starts = np.concatenate(([0], np.cumsum([len(c) for c in cells]))).astype(np.int64)
    return CellRuns(values, starts)


def summary_of(cells: list[list[float]]):
    """A CellSummary over one attribute (cell i = value i) with its runs, no database."""
    arrays = [np.asarray(c, dtype=np.float64) for c in cells]
    count = np.array([a.size for a in arrays], dtype=np.int64)
    mean = np.array([a.mean() for a in arrays])
    var = np.array([a.var() for a in arrays])
    lo = np.array([a.min() for a in arrays])
    hi = np.array([a.max() for a in arrays])
    coords = np.arange(len(cells), dtype=np.int64)[:, None]
    return _summary(None, coords, count, mean, var, lo, hi, 0.0, None, runs_of(cells))


values_st = st.one_of(
    st.integers(-40, 40).map(lambda i: i / 4),  # ties, exact quarters
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),  # includes ±0.0 and subnormals
)


@st.composite
def runs_and_query(draw):
    cells = draw(st.lists(st.lists(values_st, min_size=1, max_size=30), min_size=1, max_size=7))
    runs = runs_of(cells)
    c_v = draw(st.integers(0, len(cells) - 1))
    v = float(draw(st.sampled_from(cells[c_v])))
    member = sorted(set(draw(st.lists(st.integers(0, len(cells) - 1), max_size=len(cells)))) | {c_v})
    return cells, runs, v, np.array(member, dtype=np.int64)


def member_values(cells, member):
    return np.sort(np.concatenate([np.asarray(cells[c], dtype=np.float64) for c in member]))


def bound(draw, probe, values, v, side):
    """A query bound: a value, a rung of the probe, v itself, or a point between."""
    rungs = (-probe.neg_a if side < 0 else probe.b)
    rungs = rungs[np.isfinite(rungs)]
    pool = np.concatenate((values, rungs, [v]))
    x = float(draw(st.sampled_from(pool)))
    kind = draw(st.integers(0, 3))
    if kind == 1:
        x = math.nextafter(x, math.inf * side)
    elif kind == 2:
        x = (x + v) / 2
    return x


@settings(max_examples=200, deadline=None)
@given(runs_and_query(), st.data())
def test_property_counts_and_windows_equal_the_plain_answer(case, data):
    cells, runs, v, member = case
    probe = runs.probe(v)
    ref = member_values(cells, member)
    lo = bound(data.draw, probe, ref, v, -1)
    hi = bound(data.draw, probe, ref, v, +1)
    if data.draw(st.booleans()):
        lo, hi = min(lo, v), max(hi, v)  # the verifiers' case: the range holds v
    for right_closed in (True, False):
        want = int(np.count_nonzero((ref >= lo) & ((ref <= hi) if right_closed else (ref < hi))))
        assert probe.count(member, lo, hi, right_closed) == want, (lo, hi, right_closed)
    want = ref[(ref >= lo) & (ref <= hi)]
    np.testing.assert_array_equal(probe.between(member, lo, hi), want)


@settings(max_examples=200, deadline=None)
@given(runs_and_query(), st.sampled_from([1, 3, 10, 2048]), st.booleans(), st.data())
def test_property_windows_of_a_context_equal_the_plain_answer(case, near, dense, data):
    # Through the merged neighbourhood (dense, with _NEAR small enough that it covers only part
    # of the data) and run by run: the same counts, windows and `around` contracts.
    cells, _, v, member = case
    saved = cellruns._NEAR
    cellruns._NEAR = near
    try:
        runs = runs_of(cells)  # a fresh probe cache
        probe = runs.probe(v)
    finally:
        cellruns._NEAR = saved
    mask = np.zeros(len(cells), dtype=bool)
    mask[member] = True
    window = probe.window(mask, member, dense)
    ref = member_values(cells, member)
    for _ in range(3):
        lo = min(bound(data.draw, probe, ref, v, -1), v)
        hi = max(bound(data.draw, probe, ref, v, +1), v)
        for right_closed in (True, False):
            want = int(np.count_nonzero((ref >= lo) & ((ref <= hi) if right_closed else (ref < hi))))
            assert window.count(lo, hi, right_closed) == want, (lo, hi, right_closed)
        np.testing.assert_array_equal(window.between(lo, hi), ref[(ref >= lo) & (ref <= hi)])
        count = data.draw(st.integers(1, 40))
        a, b = window.around(count)
        assert a <= v <= b
        assert np.count_nonzero((ref >= a) & (ref < v)) >= count or a <= ref[0]
        assert np.count_nonzero((ref > v) & (ref <= b)) >= count or b >= ref[-1]


@settings(max_examples=150, deadline=None)
@given(runs_and_query(), st.integers(1, 40))
def test_property_around_holds_count_values_on_each_side(case, count):
    cells, runs, v, member = case
    ref = member_values(cells, member)
    a, b = runs.probe(v).around(member, count)
    assert a <= v <= b
    assert np.count_nonzero((ref >= a) & (ref < v)) >= count or a <= ref[0]
    assert np.count_nonzero((ref > v) & (ref <= b)) >= count or b >= ref[-1]


@settings(max_examples=150, deadline=None)
@given(runs_and_query(), st.sampled_from([1, 2, 5, 20]), st.sampled_from([2, 8, 2048]))
def test_property_lof_and_histogram_through_runs_equal_the_reference(case, k, near):
    cells, _, v, member = case
    summary = summary_of(cells)
    mask = np.zeros(len(cells), dtype=bool)
    mask[member] = True
    pop = SummaryPopulation.of(summary, mask, v)
    saved = cellruns._NEAR
    cellruns._NEAR = near  # a merged neighbourhood that covers all, or only part, of the data
    try:
        summary.runs().probe(v)
    finally:
        cellruns._NEAR = saved
    ref = ArrayPopulation.of(member_values(cells, member), v)
    assert (pop.n, pop.min, pop.max) == (ref.n, ref.min, ref.max)
    np.testing.assert_array_equal(pop.values(), ref.values())
    for rule in ("distinct", "plain"):
        got, want = local_outlier_factor(pop, k, rule), local_outlier_factor(ref, k, rule)
        # Same values, maybe other windows and band widths: equal up to summation order
        # (tests/core/verifiers/lof_reference.py derives RTOL).
        assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=RTOL), (rule, got, want)
    if ref.min < ref.max:
        assert bin_count_of_v(pop) == bin_count_of_v(ref)


def test_lof_over_runs_equals_scikit_learn_on_large_tie_free_cells():
    sklearn_neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(5)
    cells = [list(rng.normal(mu, 1.0 + i % 3, size=400)) for i, mu in enumerate(rng.uniform(-5, 5, size=12))]
    summary = summary_of(cells)
    for trial in range(40):
        mask = rng.random(len(cells)) < 0.5
        c_v = int(rng.integers(len(cells)))
        mask[c_v] = True
        x = member_values(cells, np.flatnonzero(mask))
        k = int(rng.choice([5, 20, 35]))
        v = float(cells[c_v][int(rng.integers(400))]) if trial % 2 else float(x[-1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sklearn_neighbors.LocalOutlierFactor(n_neighbors=k).fit(x[:, None])
        want = -model.negative_outlier_factor_[int(np.searchsorted(x, v))]
        pop = SummaryPopulation.of(summary, mask, v)
        assert math.isclose(local_outlier_factor(pop, k, "plain"), want, rel_tol=RTOL), (trial, want)
        # Without ties the distinct rule is the same definition minus scikit-learn's 1e-10 guard
        # on each mean reach-distance (each reach ≥ some k-distance ≥ r): LOF moves ≤ 2e-10/r.
        # A k-distance spans k'+1 consecutive sorted values around its point, so it is at least
        # half the narrowest such span.
        kk = min(k, x.size - 1)
        r = float((x[kk:] - x[:-kk]).min()) / 2
        assert math.isclose(local_outlier_factor(pop, k), want, rel_tol=RTOL + 2e-10 / r), (trial, want)


def test_probe_size_is_bounded_with_many_cells(monkeypatch):
    monkeypatch.setattr(cellruns, "_MAX_PROBE_ENTRIES", 1000)
    cells = [[float(i), float(i) + 0.5] for i in range(300)]
    runs = runs_of(cells)
    probe = runs.probe(10.0)
    assert probe.A.shape[0] <= 8 + 3 and probe.B.shape[0] <= 8 + 3  # the floor of 8 rungs (+ v, ±inf, ties)
    member = np.arange(300)
    assert probe.count(member, 2.0, 20.0, True) == 37
    assert runs.probe(10.0) is probe  # cached per value


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 150), st.data())
def test_property_first_true_finds_the_first_rung_from_any_start(last, data):
    answer = data.draw(st.integers(1, last))
    start = data.draw(st.integers(-3, last + 3))
    asked = []

    def test(j):
        assert 1 <= j < last  # `last` is taken as true without asking
        asked.append(j)
        return j >= answer

    assert _first_true(test, last, start) == answer
    assert len(asked) <= 2 * max(1, last).bit_length() + 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=12))
def test_property_gather_segments_concatenates_slices(spans):
    values = np.arange(80, dtype=np.float64) * 1.5
    begin = np.array([b for b, _ in spans], dtype=np.int64)
    end = np.array([b + n for b, n in spans], dtype=np.int64)
    want = np.concatenate([values[b:e] for b, e in zip(begin, end)] or [np.empty(0)])
    np.testing.assert_array_equal(gather_segments(values, begin, end), want)
