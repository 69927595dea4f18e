"""Histogram: V's bin count equals numpy.histogram's, bit for bit, from one range count."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers import histogram as hist
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.histogram import Histogram, bin_count_for, bin_count_of_v
from pcor_sql.errors import UserError


class NoValues(ArrayPopulation):
    """A population that refuses `values()` and `between()`: the verifier must use counts."""

    def values(self):
        raise AssertionError("histogram read all values")

    def between(self, lo, hi):
        raise AssertionError("histogram read values")


def numpy_count_of_v(values, v):
    """Which of np.histogram's bins holds v: add one more copy of v (min and max unchanged,
    so the same edges and the same code path) and see which count went up."""
    values = np.asarray(values, dtype=np.float64)
    b = math.ceil(math.sqrt(values.size))
    before, _ = np.histogram(values, bins=b)
    after, _ = np.histogram(np.append(values, v), bins=b)
    (i,) = np.flatnonzero(after - before)
    return int(before[i])


def check_against_numpy(values, v):
    values = np.asarray(values, dtype=np.float64)
    pop = NoValues(np.sort(values), float(v))
    got = bin_count_of_v(pop)
    assert got == numpy_count_of_v(values, v), (values, v)
    return got


def test_random_duplicate_heavy_and_edge_valued():
    rng = np.random.default_rng(21)
    for case in range(400):
        n = int(rng.integers(1, 3000))
        kind = case % 5
        if kind == 0:
            x = rng.normal(size=n) * 10 ** rng.uniform(-3, 6)
        elif kind == 1:
            x = rng.integers(0, 7, size=n).astype(float)
        elif kind == 2:
            x = np.minimum(np.round(rng.lognormal(10, 1, size=n), -3), 60000.0)  # top-coded
        elif kind == 3:
            x = rng.integers(-50, 50, size=n) * 0.1  # decimals: values land near edges
        else:
            x = np.full(n, rng.normal())
        for v in (x.min(), x.max(), x[int(rng.integers(n))]):
            check_against_numpy(x, v)


def test_values_exactly_on_the_edges():
    for lo, hi, n in [(0.0, 1.0, 50), (-3.0, 7.0, 101), (0.1, 0.7, 37), (1e6, 1e6 + 1.0, 17)]:
        b = bin_count_for(n)
        edges = np.linspace(lo, hi, b + 1)
        x = np.concatenate((edges, np.full(n - b - 1, edges[1]))) if n > b + 1 else edges[:n]
        x[0], x[-1] = lo, hi
        for v in np.unique(x):
            check_against_numpy(x, v)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64), min_size=1, max_size=300),
    st.data(),
)
def test_property_any_floats(values, data):
    x = np.asarray(values)
    if x.max() > x.min() and np.any(np.diff(np.linspace(x.min(), x.max(), bin_count_for(x.size) + 1)) <= 0):
        return  # numpy itself refuses this range (covered below)
    v = data.draw(st.sampled_from(values))
    check_against_numpy(x, v)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=1, max_size=400), st.integers(0, 3), st.data())
def test_property_grid_values(ints, decimals, data):
    x = np.asarray(ints, dtype=float) / 10**decimals
    v = data.draw(st.sampled_from(list(x)))
    check_against_numpy(x, v)


def test_verdict_is_count_below_rel_n():
    rng = np.random.default_rng(2)
    x = np.concatenate((rng.normal(size=2000), [15.0]))
    pop = ArrayPopulation.of(x, 15.0)
    assert Histogram().check(pop)  # alone in its bin: 1 < 0.0025 · 2001
    assert not Histogram().check(ArrayPopulation.of(x, float(np.median(x))))
    count = numpy_count_of_v(x, 15.0)
    assert Histogram().score(pop) == count / x.size
    for rel in (0.0001, 0.001, 0.01, 1.0):
        assert Histogram(rel).check(pop) == (count < rel * x.size)


def test_tiny_and_constant_populations():
    assert not Histogram().check(NoValues(np.array([3.0]), 3.0))
    assert not Histogram(rel=1.0).check(NoValues(np.array([3.0]), 3.0))
    for n in (2, 3, 10, 1000):
        assert not Histogram(rel=1.0).check(NoValues(np.full(n, -7.5), -7.5))
        assert Histogram().score(NoValues(np.full(n, -7.5), -7.5)) == 1.0
    # N = 2: two bins, one value in each.
    assert Histogram(rel=1.0).check(NoValues(np.array([0.0, 1.0]), 1.0))
    assert not Histogram(rel=0.4).check(NoValues(np.array([0.0, 1.0]), 1.0))
    # N = 3: two bins [0, .5) [.5, 1]; V = 0 shares its bin.
    assert not Histogram(rel=0.5).check(NoValues(np.array([0.0, 0.0, 1.0]), 0.0))
    assert Histogram(rel=0.5).check(NoValues(np.array([0.0, 0.0, 1.0]), 1.0))


def test_a_range_numpy_cannot_split_is_a_user_error():
    x = np.array([1.0, np.nextafter(1.0, 2.0)] * 3)
    with pytest.raises(ValueError):
        np.histogram(x, bins=bin_count_for(x.size))
    with pytest.raises(UserError, match="histogram"):
        Histogram().check(ArrayPopulation.of(x, 1.0))


def test_bisection_helpers():
    samples = [-1e300, -2.5, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1e-300, 1.0, 3.75, 1e300]
    keys = [hist._ordered(s) for s in samples]
    assert keys == sorted(keys)
    for s in samples:
        assert hist._from_ordered(hist._ordered(s)) == s
    # smallest x in [lo, hi] with step(x) >= 1, for a step at an arbitrary double
    for cut in (0.3, -0.3, 1e-12, 123456.789):
        found = hist._first_at_least(lambda x, c=cut: int(x >= c), 1, -1e6, 1e6)
        assert found == cut


def test_bins_are_ceil_sqrt_n():
    for n in list(range(1, 200)) + [10**12, 10**12 + 1, (2**26 + 1) ** 2]:
        b = bin_count_for(n)
        assert (b - 1) ** 2 < n <= b * b


@pytest.mark.parametrize("rel", [0, -0.1, 1.01, float("nan"), "x"])
def test_bad_rel_is_a_user_error(rel):
    with pytest.raises(UserError, match="rel"):
        Histogram(rel)
