"""The compiled LOF check (`lof_kernel.lof_score`) against the numpy reference
(`lof.local_outlier_factor`), the O(N²) definition (`lof_reference.brute_lof`) and scikit-learn:
the same scores within RTOL (lof_reference explains the bound: only the order of sums differs)
and the same verdicts, under both rules for duplicates, whichever way the kernel walks the
values (the merged neighbourhood, the heap over the member runs, or the one after the other)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.lof import local_outlier_factor
from pcor_sql.core.verifiers.lof_kernel import DISTINCT_RULE, PLAIN_RULE, TOO_WIDE, lof_score, pack_record, repack_positions
from pcor_sql.core.verifiers.lof_walk import record_keys, record_positions
from tests.core.verifiers.lof_reference import RULES, assert_same, brute_lof, duplicate_heavy

RULE_CODE = {"distinct": DISTINCT_RULE, "plain": PLAIN_RULE}


class Runs:
    """Per-cell sorted runs of `cells` (lists of values) and the kernel's per-record inputs for
    value v, with the merged neighbourhood [a, b] ∋ v given (any [a, b] is correct; its size
    only decides how much of the walk it serves)."""

    def __init__(self, cells, v, a=None, b=None):
        runs = [np.sort(np.asarray(c, dtype=np.float64)) for c in cells]
        self.values = np.concatenate(runs) if runs else np.empty(0)
        self.starts = np.concatenate(([0], np.cumsum([r.size for r in runs]))).astype(np.int64)
        self.v = float(v)
        a = -math.inf if a is None else min(a, v)
        b = math.inf if b is None else max(b, v)
        self.pos = record_positions(self.values, self.starts, self.v, a, b)
        self.keys = record_keys(self.values, self.starts, self.pos)
        near = [(x, c) for c, r in enumerate(runs) for x in r if a <= x <= b]
        near.sort(key=lambda e: e[0])
        self.near_v = np.array([x for x, _ in near], dtype=np.float64)
        self.near_c = np.array([c for _, c in near], dtype=np.int32)
        self.below = int(np.searchsorted(self.near_v, v, side="left"))
        self.upto = int(np.searchsorted(self.near_v, v, side="right"))
        self.runs = runs

    def score(self, member, k, rule, share=0.0):
        """(LOF, N, status); share 0: the neighbourhood serves any context; > 1: never."""
        member = np.asarray(member, dtype=bool)
        got = lof_score(self.values, self.starts, member, self.pos, self.keys, self.near_v, self.near_c, self.v,
                        self.below, self.upto, share, k, RULE_CODE[rule])
        return float(got[0]), int(got[1]), int(got[2])

    def population(self, member):
        parts = [r for r, m in zip(self.runs, member) if m]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0)


def reference(x, v, k, rule):
    return local_outlier_factor(ArrayPopulation.of(np.sort(x), v), k, rule) if x.size >= 2 else math.nan


def assert_agrees(got, want, threshold, context):
    if math.isnan(want):
        assert math.isnan(got), (got, want, context)
    else:
        assert_same(got, want, context)
    # The verdict: Lof.check's `>` (NaN never an outlier).
    assert (got > threshold) == (want > threshold), (got, want, context)


def _walks(runs_cells, v, x_sorted):
    """The three ways to walk: the neighbourhood holding everything, the heap alone, and a
    neighbourhood of a few values each side followed by the heap."""
    below = x_sorted[x_sorted < v]
    above = x_sorted[x_sorted > v]
    a = float(below[-3]) if below.size >= 3 else None
    b = float(above[2]) if above.size >= 3 else None
    return ((Runs(runs_cells, v), 0.0), (Runs(runs_cells, v), 2.0), (Runs(runs_cells, v, a, b), 0.0))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 6).flatmap(lambda top: st.lists(st.lists(st.integers(0, top), max_size=25), min_size=1, max_size=6)),
    st.sampled_from([1, 2, 3, 5, 20]),
    st.data(),
)
def test_tie_heavy_contexts_agree_with_the_reference(cells, k, data):
    # Few distinct values, many copies, V among copies, constant and empty cells, N = 1..3.
    cells = [[float(x) for x in c] for c in cells]
    present = [i for i, c in enumerate(cells) if c]
    if not present:
        return
    ci = data.draw(st.sampled_from(present))
    v = data.draw(st.sampled_from(cells[ci]))
    member = [data.draw(st.booleans()) for _ in cells]
    member[ci] = True
    flat = np.sort(np.concatenate([np.asarray(c) for c, m in zip(cells, member) if m]))
    for runs, share in _walks(cells, v, flat):
        for rule in RULES:
            got, n, status = runs.score(member, k, rule, share)
            assert (n, status) == (flat.size, 0)
            assert_agrees(got, reference(flat, v, k, rule), 1.5, (cells, member, v, k, rule, share))
            if flat.size >= 2 and np.unique(flat).size >= 2:
                assert_same(got, brute_lof(flat, int(np.flatnonzero(flat == v)[0]), k, rule), (cells, v, k, rule))


def test_random_contexts_agree_with_the_reference():
    rng = np.random.default_rng(5)
    for trial in range(120):
        kind = trial % 6
        n_cells = int(rng.integers(1, 12))
        size = int(rng.integers(2, 500))
        x = rng.normal(size=size) * 10 if kind == 5 else duplicate_heavy(rng, kind, size)
        cells = [x[rng.integers(0, n_cells, size=size) == c] for c in range(n_cells)]
        present = [i for i, c in enumerate(cells) if c.size]
        ci = present[int(rng.integers(len(present)))]
        v = float(cells[ci][int(rng.integers(cells[ci].size))])
        member = rng.random(n_cells) < 0.6
        member[ci] = True
        flat = np.sort(np.concatenate([c for c, m in zip(cells, member) if m]))
        k = int(rng.choice([1, 3, 10, 20, 35]))
        threshold = float(rng.choice([1.0, 1.2, 1.5, 3.0]))
        for runs, share in _walks(cells, v, flat):
            for rule in RULES:
                got, n, _ = runs.score(member, k, rule, share)
                assert n == flat.size
                assert_agrees(got, reference(flat, v, k, rule), threshold, (trial, rule, k, share))


def test_without_ties_equals_scikit_learn():
    neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(11)
    for trial in range(12):
        x = rng.standard_normal(300) * rng.choice([1e-3, 1.0, 1e4])
        cells = np.array_split(x, 7)
        for k in (5, 20):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = -neighbors.LocalOutlierFactor(n_neighbors=k).fit(x[:, None]).negative_outlier_factor_
            for iv in rng.integers(x.size, size=4):
                runs = Runs(cells, x[iv])
                for rule in RULES:
                    got, _, _ = runs.score(np.ones(7, dtype=bool), k, rule)
                    # scikit-learn's own guard (1e-10 on a mean reach ~1e-3·scale) moves the
                    # distinct rule's score by ≤ 1e-10 / 1e-6 relatively at the smallest scale.
                    assert math.isclose(got, want[iv], rel_tol=1e-4 if rule == "distinct" else 1e-9), (got, want[iv])


def test_distances_absorbed_by_rounding_grow_the_buffers():
    # V = 1e17 sees 300 tiny distinct values at the same rounded distance 1e17: its
    # neighbourhood holds them all, far past the first 4k + 15 values a side holds.
    tiny = np.arange(300) * 1e-3
    x = np.concatenate((tiny, [1e17, 1e17 + 16.0, 2e17]))
    for k in (2, 5):
        for rule in RULES:
            for v in (1e17, 0.0, 0.15):
                runs = Runs([x[::2], x[1::2]], v)
                got, _, _ = runs.score([True, True], k, rule, 2.0)
                assert_agrees(got, reference(x, v, k, rule), 1.5, (k, rule, v))


def test_tiny_distances_and_infinite_ratios():
    # Subnormal distances: ratios of reach sums, not 1/mean; next to them LOF(1.0) = +inf.
    tiny = np.array([0.0, 5e-324, 1e-323, 2e-323])
    x = np.concatenate((tiny, [1.0, 1.0, 3.0]))
    for v in (0.0, 1e-323, 1.0):
        got, _, _ = Runs([x], v).score([True], 2, "distinct")
        want = reference(x, v, 2, "distinct")
        assert got == want if math.isinf(want) else math.isclose(got, want, rel_tol=1e-9)
    assert Runs([x], 1.0).score([True], 2, "distinct")[0] == math.inf


def test_edge_populations():
    runs = Runs([[3.0], [3.0, 3.0], [1.0, 5.0]], 3.0)
    assert math.isnan(runs.score([True, False, False], 20, "distinct")[0])  # N = 1
    assert math.isnan(runs.score([True, False, False], 20, "plain")[0])
    assert math.isnan(runs.score([True, True, False], 20, "distinct")[0])  # one distinct value
    assert runs.score([True, True, False], 20, "plain")[0] == 1.0  # constant: LOF 1 exactly
    # Plain rule, more than k' copies of V: LOF 1 exactly; the distinct rule has no shortcut.
    assert runs.score([True, True, True], 2, "plain")[0] == 1.0
    assert_same(runs.score([True, True, True], 2, "distinct")[0], reference(np.array([1.0, 3, 3, 3, 5]), 3.0, 2, "distinct"), "d")


def test_a_span_too_wide_for_distances_is_reported():
    runs = Runs([[-1e308, 0.0], [1e308]], 0.0)
    # The caller then raises lof's UserError (tests/engine/test_lof_checks.py).
    assert runs.score([True, True], 20, "distinct")[2] == TOO_WIDE
    assert runs.score([True, True], 20, "plain")[2] == TOO_WIDE


def test_a_repacked_window_equals_one_packed_afresh():
    # A widened window walk overwrites only the positions and keys (`repack_positions`).
    rng = np.random.default_rng(5)
    cells = [rng.integers(0, 9, size=rng.integers(0, 30)).tolist() for _ in range(7)]
    flat = rng.integers(0, 2**40, size=(7, 2))
    index = rng.integers(0, 7, size=11)
    empty_v, empty_c = np.empty(0), np.empty(0, dtype=np.int32)

    def packed(runs):
        return pack_record(runs.starts, runs.pos, runs.keys, empty_v, empty_c, runs.v, 0, 0, 0.05, 3, PLAIN_RULE,
                           flat, index)

    narrow, wide = Runs(cells, 4.0, 3.0, 5.0), Runs(cells, 4.0, 1.0, 8.0)
    assert not np.array_equal(narrow.pos, wide.pos)
    ints, floats = packed(narrow)
    repack_positions(ints, floats, wide.pos, wide.keys)
    want_ints, want_floats = packed(wide)
    np.testing.assert_array_equal(ints, want_ints)
    np.testing.assert_array_equal(floats, want_floats)
    merged = Runs(cells, 4.0, 3.0, 5.0)
    with_rows = pack_record(merged.starts, merged.pos, merged.keys, merged.near_v, merged.near_c, merged.v,
                            merged.below, merged.upto, 0.05, 3, PLAIN_RULE, flat, index)
    assert merged.near_v.size
    with pytest.raises(ValueError, match="merged rows"):
        repack_positions(*with_rows, wide.pos, wide.keys)
