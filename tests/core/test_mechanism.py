"""The exponential mechanism: its exact law, its cost, and its edge cases.

Goodness-of-fit tests are seeded; each accepts at chi-square p ≥ 1e-3 and each comes with a
negative control (a wrong law the same data must reject at p < 1e-3), so the test can fail.
"""

import math

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import randomness
from pcor_sql.core.mechanism import em_cost, em_probabilities, exponential_mechanism
from pcor_sql.core.randomness import SecureRandom
from pcor_sql.errors import InternalError

P_MIN = 1e-3


def draw_counts(utilities, eps1, runs, seed, sensitivity=1.0):
    rng = np.random.default_rng(seed)
    picks = [exponential_mechanism(utilities, eps1, rng, sensitivity) for _ in range(runs)]
    return np.bincount(picks, minlength=len(utilities))


def chi2_p(counts, probs):
    counts = np.asarray(counts, dtype=float)
    expected = np.asarray(probs, dtype=float) * counts.sum()
    return stats.chisquare(counts, expected).pvalue


class NoDraws:
    """A source that fails the test if it is ever asked for randomness."""

    def random(self, size=None):
        raise AssertionError("the mechanism drew randomness it did not need")

    def integers(self, low, high=None):
        raise AssertionError("the mechanism drew randomness it did not need")


def test_em_cost():
    assert em_cost(0.1, monotone=True) == 0.1
    assert em_cost(0.1, monotone=False) == 0.2
    assert em_cost(0.2 / 51, monotone=True) == 0.2 / 51


def test_em_probabilities_exact_values():
    p = em_probabilities([0.0, 1.0, 2.0], 1.0)
    w = np.exp([0.0, 1.0, 2.0])
    assert np.allclose(p, w / w.sum(), rtol=1e-15, atol=0)
    # sensitivity divides: ε1 = 1 with Δu = 2 is ε1 = 0.5 with Δu = 1
    assert np.allclose(em_probabilities([3, 5, 9], 1.0, sensitivity=2.0), em_probabilities([3, 5, 9], 0.5))
    # a constant shift of every utility does not change the law
    assert np.allclose(em_probabilities([3, 5, 9], 0.7), em_probabilities([1003, 1005, 1009], 0.7))
    with pytest.raises(InternalError):
        em_probabilities([], 1.0)


def test_sampler_matches_the_exact_law():
    u = [0.0, 1.0, 2.0, 3.0, 3.0, 5.0]
    eps1 = 0.7
    counts = draw_counts(u, eps1, 30_000, seed=11)
    assert chi2_p(counts, em_probabilities(u, eps1)) >= P_MIN
    # negative control: the same draws reject the law of 1.3·ε1
    assert chi2_p(counts, em_probabilities(u, 1.3 * eps1)) < P_MIN


def test_sampler_respects_sensitivity():
    u = [0.0, 2.0, 4.0, 6.0]
    counts = draw_counts(u, 1.0, 20_000, seed=12, sensitivity=4.0)
    assert chi2_p(counts, em_probabilities(u, 0.25)) >= P_MIN
    assert chi2_p(counts, em_probabilities(u, 1.0)) < P_MIN


def test_secure_source_sampler_matches_the_exact_law(monkeypatch):
    # The secure source with its OS bytes replaced by a seeded stream: same arithmetic path.
    rng = np.random.default_rng(99)
    monkeypatch.setattr(randomness.os, "urandom", lambda n: rng.bytes(n))
    src = SecureRandom()
    u = [1.0, 2.0, 4.0]
    picks = [exponential_mechanism(u, 0.5, src) for _ in range(12_000)]
    counts = np.bincount(picks, minlength=3)
    assert chi2_p(counts, em_probabilities(u, 0.5)) >= P_MIN


def test_repeated_candidates_count_once_per_occurrence():
    # A multiset (the random walk's path): a context listed twice has twice the weight.
    u = [4.0, 4.0, 5.0]
    counts = draw_counts(u, 1.0, 20_000, seed=13)
    p = em_probabilities(u, 1.0)
    assert math.isclose(p[0] + p[1], 2 / (2 + math.e), rel_tol=1e-12)
    assert chi2_p(counts, p) >= P_MIN


def test_one_candidate_needs_no_draw():
    assert exponential_mechanism([123.0], 0.1, NoDraws()) == 0
    assert exponential_mechanism([0.0], math.inf, NoDraws()) == 0
    assert em_probabilities([7.0], 0.3).tolist() == [1.0]


def test_tiny_epsilon_gives_the_uniform_law():
    u = [0.0, 10.0, 1000.0, 5.0, 1e5]
    p = em_probabilities(u, 1e-12)
    assert np.allclose(p, 0.2, rtol=1e-6)
    counts = draw_counts(u, 1e-12, 20_000, seed=14)
    assert chi2_p(counts, np.full(5, 0.2)) >= P_MIN


def test_infinite_epsilon_is_argmax_with_uniform_ties():
    u = [1.0, 5.0, 5.0, 2.0, 5.0 - 1e-9]
    assert em_probabilities(u, math.inf).tolist() == [0.0, 0.5, 0.5, 0.0, 0.0]
    counts = draw_counts(u, math.inf, 6_000, seed=15)
    assert counts[0] == counts[3] == counts[4] == 0
    assert stats.binomtest(int(counts[1]), int(counts[1] + counts[2])).pvalue >= P_MIN
    # no tie: always the maximum
    assert all(exponential_mechanism([3.0, 9.0, 1.0], math.inf, np.random.default_rng(s)) == 1 for s in range(50))


@pytest.mark.parametrize("scale", [1e6, 1e300])
def test_huge_utilities_do_not_overflow(scale):
    u = [0.0, scale, -scale, scale / 2]
    with np.errstate(over="raise", invalid="raise"):
        p = em_probabilities(u, 1.0)
        picks = {exponential_mechanism(u, 1.0, np.random.default_rng(s)) for s in range(200)}
    assert p.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert picks == {1}


def test_large_utilities_with_a_small_gap_keep_the_exact_law():
    # Populations in the hundreds of thousands: exp(ε1·u) overflows, the law does not.
    u = [500_000.0, 500_001.0, 499_998.0]
    with np.errstate(over="raise", invalid="raise"):
        p = em_probabilities(u, 1.0)
        counts = draw_counts(u, 1.0, 20_000, seed=16)
    w = np.exp([0.0, 1.0, -2.0])
    assert np.allclose(p, w / w.sum(), rtol=1e-12)
    assert chi2_p(counts, p) >= P_MIN


@pytest.mark.parametrize("eps1", [0.0, -1.0, math.nan])
def test_mechanism_refuses_non_positive_or_nan_epsilon(eps1):
    with pytest.raises(InternalError):
        exponential_mechanism([1.0, 2.0], eps1, np.random.default_rng(0))


@pytest.mark.parametrize("sens", [0.0, -1.0, math.nan])
def test_mechanism_refuses_bad_sensitivity(sens):
    with pytest.raises(InternalError):
        exponential_mechanism([1.0, 2.0], 1.0, np.random.default_rng(0), sens)


def test_empty_candidate_set_is_an_internal_error():
    with pytest.raises(InternalError):
        exponential_mechanism([], 1.0, np.random.default_rng(0))


def test_same_seed_same_pick():
    u = list(np.linspace(0, 5, 40))
    a = [exponential_mechanism(u, 0.3, np.random.default_rng(s)) for s in range(30)]
    b = [exponential_mechanism(u, 0.3, np.random.default_rng(s)) for s in range(30)]
    assert a == b and len(set(a)) > 1
