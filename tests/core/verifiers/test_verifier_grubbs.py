"""Grubbs: critical values against an independent formula and published tables, verdicts on
textbook data, the scalar (one check) and vectorized (check_many) paths giving the same verdicts."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pcor_sql.core.verifiers.capabilities import Reads, capabilities_of
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.grubbs import Grubbs, grubbs_check_many, grubbs_critical, grubbs_critical_one
from pcor_sql.errors import UserError


def critical_via_beta(alpha, n):
    """Independent route: for T ~ t(ν), T²/(ν + T²) ~ Beta(1/2, ν/2), so the two-sided tail
    P(|T| > t) = α/N gives b = t²/(N−2+t²) = Beta(1/2, (N−2)/2).isf(α/N)."""
    b = stats.beta.isf(alpha / n, 0.5, (n - 2) / 2.0)
    return (n - 1) / math.sqrt(n) * math.sqrt(b)


@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.05, 0.1, 0.3])
def test_critical_values_match_the_beta_route(alpha):
    ns = np.array(list(range(3, 200)) + [250, 500, 1000, 5000, 20000, 100000])
    got = grubbs_critical(alpha, ns)
    want = np.array([critical_via_beta(alpha, int(n)) for n in ns])
    # Two different special-function routes (stdtrit vs incomplete-beta inverse): both are
    # accurate to ~1e-12 relative; 1e-8 leaves room and still catches any formula slip.
    np.testing.assert_allclose(got, want, rtol=1e-8)


def test_critical_values_match_published_tables():
    # Two-sided α = 0.05 (Grubbs 1969; NIST/SEMATECH e-Handbook §1.3.5.17: N = 8 → 2.1266).
    table = {3: 1.1543, 8: 2.1266, 10: 2.2900, 20: 2.7082, 30: 2.9085, 50: 3.1282, 100: 3.3841}
    for n, g in table.items():
        assert grubbs_critical_one(0.05, n) == pytest.approx(g, abs=5e-5)


def test_nist_example_is_an_outlier():
    # NIST e-Handbook §1.3.5.17 (Tietjen–Moore data): G = 2.4687 > 2.1266, reject H0.
    x = [199.31, 199.53, 200.19, 200.82, 201.92, 201.95, 202.18, 245.57]
    pop = ArrayPopulation.of(x, 245.57)
    assert Grubbs().score(pop) == pytest.approx(2.4687, abs=1e-4)
    assert Grubbs().check(pop)
    assert not Grubbs().check(ArrayPopulation.of(x, 201.92))
    # Without the outlier the largest value is not flagged.
    assert not Grubbs().check(ArrayPopulation.of(x[:-1], 202.18))


def test_verdict_follows_the_definition_on_random_data():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(3, 60))
        x = rng.normal(size=n)
        x[0] += rng.uniform(0, 8)
        alpha = float(rng.choice([0.01, 0.05, 0.2]))
        v = float(x[int(rng.integers(n))])
        g = abs(v - x.mean()) / x.std(ddof=1)
        want = g > critical_via_beta(alpha, n)
        if abs(g - critical_via_beta(alpha, n)) > 1e-9:
            assert Grubbs(alpha).check(ArrayPopulation.of(x, v)) == want


def test_vectorized_and_scalar_give_the_same_verdicts():
    rng = np.random.default_rng(5)
    n = rng.integers(1, 400, size=3000)
    n[:50] = rng.integers(1, 4, size=50)
    m2 = rng.exponential(size=n.size) * (n - 1).clip(0)
    m2[50:100] = 0.0
    mean = rng.normal(size=n.size)
    s = np.sqrt(np.where(n > 1, m2 / np.maximum(n - 1, 1), 0.0))
    v = mean + rng.normal(scale=3.0, size=n.size) * s
    for alpha in (0.05, 0.01):
        many = grubbs_check_many(n, mean, m2, v, alpha)
        crit = grubbs_critical(alpha, n)

        class Moments:
            pass

        scalar = []
        for i in range(n.size):
            pop = Moments()
            pop.n, pop.mean, pop.m2, pop.v = int(n[i]), float(mean[i]), float(m2[i]), float(v[i])
            scalar.append(Grubbs(alpha).check(pop))
            if n[i] >= 3:
                assert grubbs_critical_one(alpha, int(n[i])) == pytest.approx(crit[i], rel=1e-13)
            else:
                assert math.isnan(crit[i])
        assert many.tolist() == scalar
        assert Grubbs(alpha).check_many(n, mean, m2, v).tolist() == scalar
    assert many.any() and not many.all()


def test_vectorized_accepts_float_sizes_and_broadcasts():
    n = np.array([3.0, 10.0, 10.0])
    out = grubbs_check_many(n, 0.0, np.array([2.0, 9.0, 9.0]), np.array([0.0, 0.1, 50.0]), 0.05)
    assert out.tolist() == [False, False, True]
    with pytest.raises(TypeError):
        grubbs_critical(0.05, np.array([3.5]))


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, float("nan"), "0.05", None, True])
def test_bad_alpha_is_a_user_error(alpha):
    with pytest.raises(UserError, match="alpha"):
        Grubbs(alpha)


def test_options_round_trip():
    g = Grubbs(alpha=0.01)
    assert g.options() == {"alpha": 0.01}
    assert Grubbs(**g.options()) == g
    assert g.name == "grubbs" and capabilities_of(g).reads is Reads.MOMENTS


def test_scalar_critical_value_matches_the_vectorized_one_up_to_large_populations():
    # The scalar path (one check) and the array path (check_many) compute G_crit separately;
    # they must agree within rounding on sizes from 3 up to 10M rows and for several levels.
    rng = np.random.default_rng(11)
    ns = np.unique(np.concatenate([np.arange(1, 200), rng.integers(200, 10_000_000, size=2000)]))
    for alpha in (0.05, 0.01, 0.2, 1e-6):
        grubbs_critical_one.cache_clear()
        crit = grubbs_critical(alpha, ns)
        for n, want in zip(ns.tolist(), crit.tolist()):
            got = grubbs_critical_one(alpha, n)
            if n < 3:
                assert math.isnan(got) and math.isnan(want)
            else:
                assert got == pytest.approx(want, rel=1e-13)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(0, 6), min_size=1, max_size=80),
    pick=st.integers(0, 79),
    alpha=st.sampled_from([0.2, 0.05, 0.01]),
    scale=st.sampled_from([1.0, 0.1, 1e6]),
)
def test_tie_heavy_populations_get_the_reference_verdict(values, pick, alpha, scale):
    # Few distinct values, many copies: the one-check path agrees with check_many and with
    # the definition computed through scipy's t.ppf (compared away from the threshold only).
    x = np.array(values, dtype=np.float64) * scale
    v = float(x[pick % x.size])
    pop = ArrayPopulation.of(x, v)
    got = Grubbs(alpha).check(pop)
    assert got == bool(grubbs_check_many(pop.n, pop.mean, pop.m2, v, alpha))
    n = x.size
    if n < 3 or x.min() == x.max():
        assert not got
        return
    g = abs(v - x.mean()) / x.std(ddof=1)
    t = stats.t.ppf(1 - alpha / (2 * n), n - 2)
    crit = (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))
    if abs(g - crit) > 1e-9 * crit:
        assert got == (g > crit)
