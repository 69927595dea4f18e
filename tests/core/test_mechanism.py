"""The exponential mechanism: its exact law, its cost, and its edge cases.

Goodness-of-fit tests are seeded; each accepts at chi-square p ≥ 1e-3 and each comes with a
negative control (a wrong law the same data must reject at p < 1e-3), so the test can fail.
The floating-point tests are deterministic: exact weights as fractions, references to 50+
digits (`decimal`), and the sampler driven by chosen 64-bit words (`ScriptedWords`).
"""

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import mechanism, randomness
from pcor_sql.core.mechanism import (
    centred_scores,
    em_cost,
    em_probabilities,
    em_sampler_law,
    em_weights,
    exponential_mechanism,
)
from pcor_sql.core.randomness import SecureRandom
from pcor_sql.errors import InternalError
from tests.core.scripted_source import ONES, ScriptedWords

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

    def bytes(self, length):
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


@pytest.mark.parametrize("scale", [1e6, 1e308])
def test_many_huge_utilities_do_not_overflow_and_a_non_finite_one_is_refused(scale):
    # The vector path (> 128 candidates) guards overflow only when the lowest score overflows.
    u = np.concatenate([[scale, -scale], np.linspace(-1.0, 0.0, 300)])
    with np.errstate(over="raise", invalid="raise"):
        x = centred_scores(u, 1.0)
        picks = {exponential_mechanism(u, 1.0, np.random.default_rng(s)) for s in range(50)}
    assert x[0] == 0.0 and x[1] == (-math.inf if scale == 1e308 else -2e6)  # 2e308 overflows
    assert picks == {0}
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(InternalError, match="non-finite"):
            exponential_mechanism(np.append(u, bad), 1.0, np.random.default_rng(0))


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


# --- floating point: centred scores, exact weights, exact sampling, what error remains --------

U = 2.0**-53  # unit roundoff


def exact_decimal(q: Fraction) -> Decimal:
    return Decimal(q.numerator) / Decimal(q.denominator)


def exact_score(u_c: float, best: float, eps1: float, sens: float = 1.0) -> Decimal:
    """ε1·(u − max u)/Δu in exact arithmetic on the given doubles."""
    return exact_decimal(Fraction(eps1) * (Fraction(u_c) - Fraction(best)) / Fraction(sens))


def test_scores_are_centred_at_the_best():
    x = centred_scores([1e7, 1e7 - 1, 1e7 - 3], 0.1)
    assert x.tolist() == [0.0, -0.1, 0.1 * -3.0]
    # Uncentred, ε1·u at 10⁷ has already lost the low bits of the gap: 0.1·(10⁷ − 1) − 0.1·10⁷
    # is 2.3e-11 away from −0.1, a relative error of 2.3e-10 instead of 1e-16.
    assert abs((0.1 * (1e7 - 1) - 0.1 * 1e7) + 0.1) > 2e-11
    with pytest.raises(InternalError):
        centred_scores([1.0, math.nan], 1.0)
    with pytest.raises(InternalError):
        exponential_mechanism([1.0, math.inf], 1.0, np.random.default_rng(0))


def test_the_best_weighs_exactly_one_and_every_weight_is_a_53_bit_dyadic(path):
    m, e = em_weights([5.0, 5.0, 3.0, 5.0 - 2e-12], 0.7)
    assert m.tolist()[:2] == [2**52, 2**52] and e.tolist()[:2] == [-52, -52]  # 2⁵²·2⁻⁵² = 1
    assert all(2**52 <= mc < 2**53 for mc in m.tolist())
    # ε1 = ln 2, gap 10: w = 2⁻¹⁰ up to the documented rounding
    m, e = em_weights([0.0, -10.0], math.log(2.0))
    w = Fraction(int(m[1])) * Fraction(2) ** int(e[1])
    assert abs(w / Fraction(1, 2**10) - 1) <= (5 * 10 * math.log(2) + 6) * U


@pytest.mark.parametrize("exp", [np.exp, math.exp], ids=["numpy", "math"])
def test_exp_on_the_reduced_range_is_within_two_units_of_roundoff(exp):
    # The docstring's bound charges exp 2u on about [−ln 2, 0] (numpy's for many candidates,
    # math's for a few); check both against 50 digits.
    getcontext().prec = 50
    r = np.linspace(-math.log(2) - 1e-9, 1e-9, 4001).tolist()
    worst = max(abs(exact_decimal(Fraction(float(exp(x)))) / exact_decimal(Fraction(x)).exp() - 1) for x in r)
    assert worst <= 2 * Decimal(U)


@pytest.fixture(params=["scalar", "vector"])
def path(request, monkeypatch):
    """Run a test on the few-candidates (Python scalars) and the many-candidates (numpy) path."""
    if request.param == "vector":
        monkeypatch.setattr(mechanism, "_SCALAR", 0)
    return request.param


@pytest.mark.parametrize("eps1", [0.5, 1.0, 0.013, 3.7])
def test_weights_are_within_the_documented_rounding_of_the_exact_exponential(eps1, path):
    getcontext().prec = 60
    rng = np.random.default_rng(int(eps1 * 1000))
    best = 1e7
    gaps = np.concatenate([[0.0, 1.0, 40 / eps1, 700 / eps1, 1000 / eps1, 1419 / eps1], rng.uniform(0, 1419 / eps1, 40)])
    u = (best - gaps).tolist()
    m, e = em_weights(u, eps1)
    for uc, mc, ec in zip(u, m.tolist(), e.tolist()):
        x = exact_score(uc, best, eps1)
        w = Fraction(mc) * Fraction(2) ** ec
        assert mc > 0, "every candidate within 1419/ε1 of the best is kept"
        err = abs(exact_decimal(w).ln() - x)
        assert err <= (5 * abs(x) + 6) * Decimal(U), (uc, err)


def test_a_gap_of_40_over_eps1_keeps_its_exact_probability(path):
    getcontext().prec = 60
    eps1, u = 0.5, [1e7, 1e7 - 80.0]  # gap 40/ε1: the old Gumbel draw never chose the second
    tiny = Decimal(-40).exp()
    exact = tiny / (1 + tiny)
    law = em_sampler_law(u, eps1)
    assert abs(exact_decimal(law[1]) / exact - 1) <= 2 * (5 * 40 + 6) * Decimal(U)
    assert em_probabilities(u, eps1)[1] == pytest.approx(float(exact), rel=1e-12)
    # The decision procedure. The scalar path lays the candidates out in order, so U ≥ 1 − P̃
    # picks the far one; the vector path lays out groups by ascending exponent, so U < P̃ does.
    # The first word W decides when [W, W + 1)/2⁶⁴ lies on one side of that cut, and reads on
    # for the one word that holds it.
    edge = 1 - law[1] if path == "scalar" else law[1]
    cut = math.floor(edge * 2**64)
    assert 0 < cut < 2**64 - 1  # P̃ > 2⁻⁶⁴: some first words choose it outright
    below, above = (0, 1) if path == "scalar" else (1, 0)
    for words, pick in [([cut - 1], below), ([cut + 1], above), ([0], below), ([ONES], above)]:
        src = ScriptedWords(words)
        assert exponential_mechanism(u, eps1, src) == pick and src.read == 1
    src = ScriptedWords([cut, 0])
    assert exponential_mechanism(u, eps1, src) == below and src.read == 2


def test_a_gap_of_1000_over_eps1_keeps_its_exact_probability(path):
    getcontext().prec = 60
    eps1, u = 0.5, [0.0, -2000.0]  # probability e^-1000 ≈ 5e-435: below every double
    tiny = Decimal(-1000).exp()
    law = em_sampler_law(u, eps1)
    assert abs(exact_decimal(law[1]) / (tiny / (1 + tiny)) - 1) <= 2 * (5 * 1000 + 6) * Decimal(U)
    assert em_probabilities(u, eps1)[1] == 0.0  # the double-precision law underflows; the sampler does not
    # P̃ ≈ 2^-1442.7: its set of U is an interval of that length, reached after 23 words.
    # scalar: one cumulative in candidate order (best, then the far one, at the top of [0, 1));
    # vector: groups by ascending exponent (the far one first, at the bottom), then members.
    far, near = ([ONES], [0]) if path == "scalar" else ([0], [ONES])
    src = ScriptedWords(far * 23)
    assert exponential_mechanism(u, eps1, src) == 1 and src.read == 23
    src = ScriptedWords(far * 22 + near)
    assert exponential_mechanism(u, eps1, src) == 0 and src.read == 23


def test_candidates_beyond_the_cutoff_weigh_nothing(path):
    getcontext().prec = 60
    eps1 = 0.5
    kept, dropped = -2 * 1419.0, -2 * 1420.0  # scores −1419 and −1420; the cutoff is 2048·ln 2 ≈ 1419.57
    assert Decimal(-1420).exp() < Decimal(2) ** -2048
    m, _ = em_weights([0.0, kept, dropped], eps1)
    assert m[1] > 0 and m[2] == 0
    law = em_sampler_law([0.0, kept, dropped], eps1)
    assert law[2] == 0 and 0 < law[1] < Fraction(1, 2**2047)


def merged_chi2_p(counts, probs, min_expected=5.0):
    """Chi-square p-value with the cells expected below `min_expected` merged into one."""
    counts = np.asarray(counts, dtype=float)
    expected = np.asarray(probs, dtype=float) * counts.sum()
    big = expected >= min_expected
    obs, exp = list(counts[big]), list(expected[big])
    if (~big).any():
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
        if exp[-1] < min_expected:  # fold a thin tail into the smallest kept cell
            i = int(np.argmin(exp[:-1]))
            obs[i] += obs.pop()
            exp[i] += exp.pop()
    return stats.chisquare(obs, exp).pvalue


def test_sampler_with_utilities_up_to_ten_million_matches_the_exact_law(monkeypatch):
    # The check: utilities ~10⁷ (populations), small gaps, and far candidates.
    u = [1e7, 1e7 - 0.5, 1e7 - 1, 1e7 - 2, 1e7 - 3, 1e7 - 7, 9_999_950.0, 5e6, 0.0]
    eps1 = 0.8
    law = em_probabilities(u, eps1)
    assert law[0] == pytest.approx(1 / sum(math.exp(-eps1 * g) for g in (0, 0.5, 1, 2, 3, 7, 50, 5e6, 1e7)), rel=1e-14)
    counts = draw_counts(u, eps1, 30_000, seed=17)
    assert merged_chi2_p(counts, law) >= P_MIN
    assert merged_chi2_p(counts, em_probabilities(u, 1.2 * eps1)) < P_MIN  # negative control
    # the same law from the secure source (OS bytes replaced by a seeded stream)
    rng = np.random.default_rng(18)
    monkeypatch.setattr(randomness.os, "urandom", lambda n: rng.bytes(n))
    src = SecureRandom()
    counts = np.bincount([exponential_mechanism(u, eps1, src) for _ in range(10_000)], minlength=len(u))
    assert merged_chi2_p(counts, law) >= P_MIN


def test_two_stage_sampler_matches_the_exact_law(monkeypatch):
    # Many candidates take the numpy group-then-member path; force it on a small set too.
    u = list(1e7 - np.arange(300) * 0.05)
    law = em_probabilities(u, 1.0)
    counts = draw_counts(u, 1.0, 2_000, seed=19)
    assert merged_chi2_p(counts, law) >= P_MIN
    monkeypatch.setattr(mechanism, "_SCALAR", 0)
    small = [1e7, 1e7 - 0.3, 1e7 - 1.1, 1e7 - 2.0, 1e7 - 4.0, 1e7 - 4.0]
    counts = draw_counts(small, 1.0, 10_000, seed=20)
    assert merged_chi2_p(counts, em_probabilities(small, 1.0)) >= P_MIN
    assert merged_chi2_p(counts, em_probabilities(small, 1.3)) < P_MIN
