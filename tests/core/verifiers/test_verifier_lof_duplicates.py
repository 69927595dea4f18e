"""LOF's rule for duplicates (DESIGN.md §2): Breunig et al.'s k-distinct-distance by default,
the plain k-distance on request (scikit-learn's only without ties) — a worked example, tie-heavy data against the O(N²)
reference, and the failure the distinct rule exists to avoid."""

import math
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.lof import Lof, local_outlier_factor
from tests.core.verifiers.lof_reference import RULES, Spy, StingySpy, assert_same, brute_lof, brute_lof_all


def test_worked_example():
    # x = 0, 0, 1, 3 and k = 1. Distinct rule: k-distances 1, 1, 1, 2 (0's nearest other value
    # is 1, 3's is 1). N(3) = {1}: reach max(1, 2) = 2, lrd(3) = 1/2. N(1) = {0, 0}: reach 1,
    # lrd(1) = 1. N(0) = {its copy, 1}: reach max(1, 0) = 1 and 1, lrd(0) = 1. So LOF(3) = 2,
    # LOF(1) = LOF(0) = 1. Plain rule: 0's k-distance is 0 (its copy), lrd(0) = 1e10, and
    # LOF(1) = 1e10·(1 + 1e-10) — an ordinary point made an extreme outlier by a duplicate.
    x = [0.0, 0.0, 1.0, 3.0]
    assert local_outlier_factor(Spy(x, 3.0), 1) == 2.0  # 1 / (1/2): exact in binary
    assert local_outlier_factor(Spy(x, 1.0), 1) == 1.0
    assert local_outlier_factor(Spy(x, 0.0), 1) == 1.0
    assert math.isclose(local_outlier_factor(Spy(x, 1.0), 1, "plain"), 1e10 + 1.0, rel_tol=1e-9)
    assert math.isclose(local_outlier_factor(Spy(x, 3.0), 1, "plain"), (2 + 1e-10) / (1 + 1e-10), rel_tol=1e-12)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(lambda top: st.lists(st.integers(0, top), min_size=2, max_size=120)),
    st.sampled_from([1, 2, 3, 5, 8, 20, 40]),
    st.data(),
)
def test_property_few_integers_equal_brute_force(ints, k, data):
    # Values from a handful of integers: every value has many copies, k is often ≥ D
    # (k' = D − 1), and most distances tie.
    x = np.asarray(ints, dtype=float)
    iv = data.draw(st.integers(0, x.size - 1))
    got = local_outlier_factor(Spy(x, x[iv]), k)
    if np.unique(x).size < 2:
        assert math.isnan(got) and not Lof(k=k, threshold=1.0).check(Spy(x, x[iv]))
    else:
        assert_same(got, brute_lof(x, iv, k), (list(x), iv, k))
        # The growing path (first windows far too small) reaches the same number.
        assert_same(local_outlier_factor(StingySpy(x, x[iv]), k), brute_lof(x, iv, k), (list(x), iv, k))


def test_k_at_least_the_distinct_count_uses_every_other_value():
    # D = 4 distinct values: for k ≥ 3, k' = 3 and LOF no longer depends on k.
    rng = np.random.default_rng(3)
    x = rng.choice([1.0, 2.0, 4.0, 9.0], size=300)
    for v in (1.0, 9.0):
        scores = [local_outlier_factor(Spy(x, v), k) for k in (3, 4, 20, 299, 1000)]
        want = brute_lof(x, int(np.flatnonzero(x == v)[0]), 3)
        for k, got in zip((3, 4, 20, 299, 1000), scores):
            assert_same(got, want, (v, k))  # the same number, whatever k ≥ 3


def test_a_record_next_to_a_block_of_copies():
    # Wages rounded to a quarter and top-coded, one value ×120: the record just below the block
    # is ordinary, yet under the plain rule its neighbours' lrd is ≈ 1e10.
    rng = np.random.default_rng(21)
    wages = np.round(rng.lognormal(3.0, 0.4, size=2000) * 4) / 4
    x = np.concatenate((np.minimum(wages, 60.0), np.full(120, 20.0)))
    v = float(x[(x > 19.0) & (x < 20.0)].max())
    iv = int(np.flatnonzero(x == v)[0])
    plain, distinct = brute_lof_all(x, 20, "plain")[iv], brute_lof_all(x, 20)[iv]
    assert plain > 1e6 and distinct < 1.5  # the artefact, and its absence
    assert_same(local_outlier_factor(Spy(x, v), 20, "plain"), plain, "plain")
    assert_same(local_outlier_factor(Spy(x, v), 20), distinct, "distinct")
    assert Lof(duplicates="plain").check(Spy(x, v)) and not Lof().check(Spy(x, v))


class Runs(ArrayPopulation):
    """A population that serves the distinct rule its (value, count) pairs and refuses rows,
    as the per-cell windows of the Spark path do."""

    def __init__(self, values, v):
        super().__init__(np.sort(np.asarray(values, dtype=np.float64)), float(v))
        object.__setattr__(self, "calls", [])

    def between(self, lo, hi):
        raise AssertionError("the distinct rule expanded rows although (value, count) pairs were offered")

    def distinct_between(self, lo, hi):
        self.calls.append((lo, hi))
        got = super().between(lo, hi)
        values, counts = np.unique(got, return_counts=True)
        return values, counts.astype(np.float64)


def test_distinct_rule_reads_value_count_pairs_when_offered():
    rng = np.random.default_rng(8)
    x = np.concatenate((rng.integers(0, 60, size=3000).astype(float), rng.uniform(70, 90, size=5)))
    for iv in rng.integers(x.size, size=20):
        pop = Runs(x, x[iv])
        assert_same(local_outlier_factor(pop, 20), local_outlier_factor(ArrayPopulation.of(x, x[iv]), 20), iv)
        assert pop.calls


def test_both_rules_agree_without_ties():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(500) * 7.0
    for iv in rng.integers(500, size=25):
        scores = [local_outlier_factor(Spy(x, x[iv]), 10, rule) for rule in RULES]
        # Identical definitions; only the plain rule's 1e-10 guard separates them (≤ 2e-10 / the
        # smallest mean reach-distance, ~1e-2 here: well inside 1e-6).
        assert math.isclose(*scores, rel_tol=1e-6)


def test_tiny_distances_neither_underflow_nor_warn():
    # Distinct values 5e-324 apart (subnormal distances): a mean of them would round to 0 and
    # 1 / mean overflow. The distinct rule works with ratios of reach sums instead, so the tiny
    # cluster gets finite LOFs, the same as the cluster scaled by 2^1000 (power-of-two scaling
    # rounds nothing); next to it, 1.0 has a LOF past the double range: +inf, an outlier.
    tiny = np.array([0.0, 5e-324, 1e-323, 2e-323])
    x = np.concatenate((tiny, [1.0, 1.0, 3.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in tiny:
            got = local_outlier_factor(Spy(x, v), 2)
            scaled = local_outlier_factor(Spy(tiny * 2.0**1000, v * 2.0**1000), 2)
            assert math.isfinite(got)
            assert_same(got, scaled, v)
        assert local_outlier_factor(Spy(x, 1.0), 2) == math.inf
        assert Lof(k=2).check(Spy(x, 1.0))
