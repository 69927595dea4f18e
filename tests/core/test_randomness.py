"""Randomness sources: the OS-backed secure source and seeded generators.

The secure source reads `os.urandom`. To test its arithmetic deterministically, some tests
replace `os.urandom` (as seen by the randomness module) with a byte stream from a seeded
generator or with chosen bytes; the code under test is unchanged.
"""

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import randomness
from pcor_sql.core.randomness import SecureRandom, make_source, uniform_open

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
