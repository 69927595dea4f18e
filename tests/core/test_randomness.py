"""Randomness sources: the OS-backed secure source and seeded generators.

The secure source reads `os.urandom`. To test its arithmetic deterministically, some tests
replace `os.urandom` (as seen by the randomness module) with a byte stream from a seeded
generator or with chosen bytes; the code under test is unchanged.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import randomness
from pcor_sql.core.randomness import (
    SecureRandom,
    bernoulli,
    make_source,
    pick_by_cumulative,
    random_words,
    uniform_open,
)
from pcor_sql.errors import InternalError
from tests.core.scripted_source import ONES, ScriptedWords

P_MIN = 1e-3  # chi-square acceptance level of the seeded goodness-of-fit tests


@pytest.fixture
def seeded_urandom(monkeypatch):
    """Make SecureRandom read a reproducible byte stream."""
    rng = np.random.default_rng(20240601)
    monkeypatch.setattr(randomness.os, "urandom", lambda n: rng.bytes(n))
    return rng


def fixed_urandom(monkeypatch, chunks):
    """os.urandom returns these byte strings in order (each call must ask for its length)."""
    it = iter(chunks)

    def fake(n):
        chunk = next(it)
        assert len(chunk) == n
        return chunk

    monkeypatch.setattr(randomness.os, "urandom", fake)


def test_secure_random_is_strictly_inside_the_unit_interval():
    src = SecureRandom()
    u = src.random(50_000)
    assert u.dtype == np.float64 and u.shape == (50_000,)
    assert np.all(u > 0.0) and np.all(u < 1.0)
    x = src.random()
    assert isinstance(x, float) and 0.0 < x < 1.0


@pytest.mark.parametrize("byte", [0x00, 0x01, 0x80, 0xFE, 0xFF])
def test_secure_random_extreme_words_stay_strictly_inside(monkeypatch, byte):
    # The largest 64-bit word must not round up to 1.0: log(-log(u)) would be -inf and the
    # Gumbel noise +inf, so that candidate would win whatever its utility.
    monkeypatch.setattr(randomness.os, "urandom", lambda n: bytes([byte]) * n)
    u = SecureRandom().random(4)
    assert np.all(u > 0.0) and np.all(u < 1.0), u
    assert np.all(np.isfinite(-np.log(-np.log(u))))


def test_secure_random_is_uniform(seeded_urandom):
    u = SecureRandom().random(40_000)
    assert stats.kstest(u, "uniform").pvalue >= P_MIN
    counts = np.bincount((u * 20).astype(int), minlength=20)
    assert stats.chisquare(counts).pvalue >= P_MIN


def test_secure_integers_range_and_uniformity(seeded_urandom):
    src = SecureRandom()
    draws = np.array([src.integers(0, 5) for _ in range(20_000)])
    assert draws.min() == 0 and draws.max() == 4
    assert stats.chisquare(np.bincount(draws, minlength=5)).pvalue >= P_MIN
    draws = np.array([src.integers(3) for _ in range(6_000)])  # one-argument form: [0, 3)
    assert set(draws.tolist()) == {0, 1, 2}
    assert stats.chisquare(np.bincount(draws, minlength=3)).pvalue >= P_MIN
    draws = [src.integers(-2, 1) for _ in range(300)]
    assert set(draws) == {-2, -1, 0}
    assert all(src.integers(7, 8) == 7 for _ in range(20))


def test_secure_integers_rejects_instead_of_reducing_modulo(monkeypatch):
    # span 5 needs 3 bits: words 7, 6, 5 are rejected (a modulo would map them to 2, 1, 0),
    # 3 is accepted. The high bits of the byte are masked off.
    fixed_urandom(monkeypatch, [bytes([0x07]), bytes([0xF6]), bytes([0x05]), bytes([0x03])])
    assert SecureRandom().integers(10, 15) == 13


def test_secure_integers_span_above_one_byte(monkeypatch):
    # span 300 needs 9 bits (2 bytes, little-endian): 0x01FF = 511 rejected, 0x012C = 300
    # rejected, 0x012B = 299 accepted.
    fixed_urandom(monkeypatch, [b"\xff\x01", b"\x2c\x01", b"\x2b\x01"])
    assert SecureRandom().integers(0, 300) == 299


def test_secure_integers_empty_range():
    with pytest.raises(ValueError):
        SecureRandom().integers(3, 3)
    with pytest.raises(ValueError):
        SecureRandom().integers(0)


def test_make_source_none_is_secure_and_unseeded():
    src, seeded = make_source(None)
    assert isinstance(src, SecureRandom) and seeded is False
    a, b = make_source(None)[0].random(4), make_source(None)[0].random(4)
    assert not np.array_equal(a, b)  # 4 independent 53-bit draws: equal with prob. 2^-212


def test_make_source_seed_is_reproducible_and_labelled():
    s1, seeded = make_source(7)
    s2, _ = make_source(7)
    s3, _ = make_source(8)
    assert seeded is True and isinstance(s1, np.random.Generator)
    a = s1.random(8)
    assert np.array_equal(a, s2.random(8))
    assert not np.array_equal(a, s3.random(8))
    assert make_source(0)[1] is True  # seed 0 is a seed, not "no seed"


def test_uniform_open_never_returns_zero():
    class Zeros:
        def random(self, size=None):
            return np.zeros(size)

    u = uniform_open(Zeros(), 3)
    assert np.all(u > 0.0) and np.all(np.isfinite(-np.log(-np.log(u))))
    u = uniform_open(np.random.default_rng(1), 1000)
    assert u.shape == (1000,) and np.all((u > 0) & (u < 1))


# --- exact draws: 64-bit words, Bernoulli(p) for a double p, inverse CDF over integers ---------


def test_random_words_from_secure_bytes_are_little_endian(monkeypatch):
    fixed_urandom(monkeypatch, [bytes(range(16))])
    words = random_words(SecureRandom(), 2)
    assert words.dtype == np.uint64
    assert words.tolist() == [0x0706050403020100, 0x0F0E0D0C0B0A0908]


def test_random_words_from_a_generator_are_its_full_range_integers():
    # PCG64 (what make_source builds): the raw words, which are its full-range uint64 integers.
    words = random_words(np.random.default_rng(5), 4)
    full = np.random.default_rng(5).integers(0, 2**64 - 1, size=4, dtype=np.uint64, endpoint=True)
    assert words.dtype == np.uint64 and words.tolist() == full.tolist()
    # MT19937's raw outputs are 32-bit, so it goes through `bytes` instead.
    mt = random_words(np.random.Generator(np.random.MT19937(5)), 3)
    expected = np.frombuffer(np.random.Generator(np.random.MT19937(5)).bytes(24), dtype="<u8")
    assert mt.tolist() == expected.tolist() and int(mt.max()) >= 2**32


def test_bernoulli_of_two_to_the_minus_60_by_counting_its_cases():
    # p·2⁶⁴ = 16 exactly (f = 0): the first word W decides alone, True iff W < 16. So exactly
    # 16 of the 2⁶⁴ words give True: P(True) = 16/2⁶⁴ = 2⁻⁶⁰ = p, no grid error.
    p = 2.0**-60
    for word, expected in [(0, True), (15, True), (16, False), (17, False), (ONES, False)]:
        src = ScriptedWords([word])  # one word only: a tie with f = 0 must not read more
        assert bernoulli(src, [p]).tolist() == [expected] and src.read == 1
    assert Fraction(16, 2**64) == Fraction(p)
    assert bernoulli(ScriptedWords([15, 16, 17, 0, ONES]), np.full(5, p)).tolist() == [True, False, False, True, False]


def test_bernoulli_of_the_smallest_subnormal_by_counting_its_cases():
    # p = 5e-324 = 2⁻¹⁰⁷⁴: p·2^{64j} < 1 for j ≤ 16 (integer part 0, so only W = 0 continues)
    # and p·2^{64·17} = 2¹⁴. True iff the first 16 words are 0 and the 17th is < 2¹⁴:
    # P(True) = 2^{−64·16}·2¹⁴/2⁶⁴ = 2⁻¹⁰⁷⁴ = p exactly.
    p = 5e-324
    assert Fraction(p) == Fraction(1, 2**1074) and Fraction(2**14, 2 ** (64 * 17)) == Fraction(p)
    for last, expected in [(0, True), (2**14 - 1, True), (2**14, False), (ONES, False)]:
        src = ScriptedWords([0] * 16 + [last])
        assert bernoulli(src, [p]).tolist() == [expected] and src.read == 17
    for level in (1, 9, 16):  # a nonzero word at any earlier level decides "False" at once
        src = ScriptedWords([0] * (level - 1) + [1])
        assert bernoulli(src, [p]).tolist() == [False] and src.read == level


def test_bernoulli_splits_p_exactly_and_continues_on_a_tie():
    # p·2⁶⁴ ≈ 1.8e13 < 2⁵³ has a fractional part f, which a tie (W = ⌊p·2⁶⁴⌋) goes on to compare.
    p = 1e-6
    whole = math.floor(math.ldexp(p, 64))
    frac = math.ldexp(p, 64) - whole
    assert 0 < frac < 1 and Fraction(whole) + Fraction(frac) == Fraction(p) * 2**64  # the split is exact
    assert bernoulli(ScriptedWords([whole - 1]), [p]).tolist() == [True]
    assert bernoulli(ScriptedWords([whole + 1]), [p]).tolist() == [False]
    cut = math.floor(math.ldexp(frac, 64))  # on a tie the next word is compared with f's bits
    assert bernoulli(ScriptedWords([whole, cut - 1]), [p]).tolist() == [True]
    assert bernoulli(ScriptedWords([whole, cut + 1]), [p]).tolist() == [False]
    # 0.3·2⁶⁴ is already an integer as a double (f = 0): a tie is "False" without reading on.
    assert bernoulli(ScriptedWords([math.floor(math.ldexp(0.3, 64))]), [0.3]).tolist() == [False]


def test_bernoulli_certain_outcomes_draw_nothing_and_shapes_are_kept():
    out = bernoulli(ScriptedWords([]), np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert out.dtype == bool and out.tolist() == [[False, True], [True, False]]
    assert bernoulli(ScriptedWords([]), np.zeros(0)).shape == (0,)
    assert bernoulli(ScriptedWords([]), 1.0).shape == () and bool(bernoulli(ScriptedWords([]), 1.0))
    assert bool(bernoulli(ScriptedWords([2**63 - 1]), 0.5)) and not bool(bernoulli(ScriptedWords([2**63]), 0.5))


@pytest.mark.parametrize("p", [-0.1, 1.5, math.nan])
def test_bernoulli_refuses_a_non_probability(p):
    with pytest.raises(InternalError):
        bernoulli(np.random.default_rng(0), [p])


def test_bernoulli_frequencies_from_both_sources(seeded_urandom):
    n, delta = 200_000, 1e-6
    tol = math.sqrt(math.log(2 / delta) / (2 * n))  # Hoeffding
    for source in (np.random.default_rng(21), SecureRandom()):
        for p in (1 / 3, 0.05, 0.5):
            assert abs(bernoulli(source, np.full(n, p)).mean() - p) <= tol, (type(source).__name__, p)


def test_pick_by_cumulative_dyadic_total_by_counting_first_words():
    # C = (3, 5, 8): U·8 is decided by U's top 3 bits, so the first word alone decides and
    # 3·2⁶¹, 2·2⁶¹, 3·2⁶¹ words go to the buckets: the law is (3, 2, 3)/8 exactly.
    cases = [(0, 0), (3 * 2**61 - 1, 0), (3 * 2**61, 1), (5 * 2**61 - 1, 1), (5 * 2**61, 2), (ONES, 2)]
    for word, bucket in cases:
        src = ScriptedWords([word])
        assert pick_by_cumulative(src, [3, 5, 8].__getitem__, 3) == bucket and src.read == 1


def test_pick_by_cumulative_reads_more_bits_only_across_a_boundary():
    # T = 3: the word 0x55…55 holds the boundary 1/3 = 0.0101…₂, so it reads on; the second
    # word decides unless it is 0x55…55 again.
    w = int("55" * 8, 16)
    assert pick_by_cumulative(ScriptedWords([w - 1]), [1, 2, 3].__getitem__, 3) == 0
    assert pick_by_cumulative(ScriptedWords([w + 1]), [1, 2, 3].__getitem__, 3) == 1
    assert pick_by_cumulative(ScriptedWords([w, w - 1]), [1, 2, 3].__getitem__, 3) == 0
    assert pick_by_cumulative(ScriptedWords([w, w + 1]), [1, 2, 3].__getitem__, 3) == 1
    src = ScriptedWords([w, w, 0])
    assert pick_by_cumulative(src, [1, 2, 3].__getitem__, 3) == 0 and src.read == 3


def test_pick_by_cumulative_never_picks_an_empty_bucket_and_one_bucket_needs_no_draw():
    assert pick_by_cumulative(ScriptedWords([2**63 - 1]), [2, 2, 4].__getitem__, 3) == 0
    assert pick_by_cumulative(ScriptedWords([2**63]), [2, 2, 4].__getitem__, 3) == 2
    assert pick_by_cumulative(ScriptedWords([]), [7].__getitem__, 1) == 0
    with pytest.raises(InternalError):
        pick_by_cumulative(ScriptedWords([]), [0, 0].__getitem__, 2)
    with pytest.raises(InternalError):
        pick_by_cumulative(ScriptedWords([]), [].__getitem__, 0)


def test_pick_by_cumulative_law_from_both_sources(seeded_urandom):
    cumulative = [1, 3, 3, 7, 12]  # weights 1, 2, 0, 4, 5
    for source in (np.random.default_rng(22), SecureRandom()):
        picks = [pick_by_cumulative(source, cumulative.__getitem__, 5) for _ in range(6_000)]
        counts = np.bincount(picks, minlength=5)
        assert counts[2] == 0
        assert stats.chisquare(counts[[0, 1, 3, 4]], np.array([1, 2, 4, 5]) / 12 * 6_000).pvalue >= P_MIN
