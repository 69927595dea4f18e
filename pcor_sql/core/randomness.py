"""Sources of randomness, and exact draws from them.

Real releases draw from the operating system's CSPRNG; a seed gives a reproducible
`numpy.random.Generator` for tests and benchmarks, labelled not for real releases. Every
mechanism takes a source as an argument: there is no module-level random state.

Exact draws. A double is a dyadic rational, so "U < p" for an exact uniform U ∈ [0, 1) and a
double p (or "U·T < C" for integers T, C) can be decided exactly by reading U's binary
expansion 64 bits at a time and stopping as soon as the answer is determined. `bernoulli` and
`pick_by_cumulative` do this: their laws are exactly p and (C_j − C_{j−1})/T, with no grid
error, for probabilities as small as the smallest subnormal 2⁻¹⁰⁷⁴. Both read uniform 64-bit
words (`random_words`): from `source.bytes`, which `SecureRandom` and `numpy.random.Generator`
both provide, or from a numpy Generator's 64-bit bit generator directly.
"""

from __future__ import annotations

import bisect
import os
from typing import Callable, Protocol, Union

import numpy as np

from pcor_sql.errors import InternalError

_TWO_POW_M52 = 2.0**-52


class RandomSource(Protocol):
    def random(self, size: int | None = None) -> np.ndarray | float: ...

    def integers(self, low: int, high: int | None = None) -> int: ...

    def bytes(self, length: int) -> bytes: ...


class SecureRandom:
    """Uniform draws from `os.urandom` (the kernel CSPRNG).

    `random` returns doubles in the open interval (0, 1): (k + 0.5)·2⁻⁵² for a uniform 52-bit k.
    Every such value is exactly representable (the largest is 1 − 2⁻⁵³), so none rounds to 0
    or 1 and log(u) and log(−log u) are always finite. `integers` uses rejection sampling, so it has
    no modulo bias.
    """

    def random(self, size: int | None = None) -> np.ndarray | float:
        n = 1 if size is None else int(size)
        words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64) >> np.uint64(12)
        out = (words.astype(np.float64) + 0.5) * _TWO_POW_M52
        return float(out[0]) if size is None else out

    def bytes(self, length: int) -> bytes:
        return os.urandom(length)

    def integers(self, low: int, high: int | None = None) -> int:
        if high is None:
            low, high = 0, low
        span = high - low
        if span <= 0:
            raise ValueError("empty range")
        bits = max(1, (span - 1).bit_length())
        nbytes = (bits + 7) // 8
        while True:
            k = int.from_bytes(os.urandom(nbytes), "little") & ((1 << bits) - 1)
            if k < span:
                return low + k


Source = Union[SecureRandom, np.random.Generator]


def make_source(seed: int | None) -> tuple[Source, bool]:
    """(source, seeded): the secure source when seed is None, else a seeded PCG64 Generator."""
    if seed is None:
        return SecureRandom(), False
    return np.random.default_rng(seed), True


def record_source(seed: int | None, position: int) -> Source:
    """The coins of the record at `position` (0, 1, ...) of a request's records: the secure
    source when unseeded; else record 0 draws from `make_source(seed)` (a one-record request
    draws exactly as before) and record i > 0 from the seed's i-th child stream
    (`SeedSequence(seed, spawn_key=(i,))`, independent of the others). Each record's coins
    depend on the seed and its position alone, so a seeded batch gives the same outputs
    whichever process searches which record, in whatever order (DESIGN.md §10)."""
    if seed is None or position == 0:
        return make_source(seed)[0]
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(position,)))


def uniform_open(source: Source, size: int) -> np.ndarray:
    """`size` uniforms strictly inside (0, 1) from either kind of source."""
    u = np.asarray(source.random(size), dtype=np.float64)
    # numpy's Generator can return exactly 0.0; nudge to the smallest positive double instead.
    return np.where(u <= 0.0, np.nextafter(0.0, 1.0), u)


#: Bit generators whose raw outputs are uniform 64-bit words (MT19937's are 32-bit).
_RAW64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox)


def random_words(source: Source, count: int) -> np.ndarray:
    """`count` independent uniform 64-bit words (uint64).

    From `source.bytes`, read little-endian whatever the platform, so a seed gives the same
    words everywhere. A numpy Generator over a 64-bit bit generator (`default_rng` is PCG64)
    gives its raw words instead: the same words its `integers` over the full uint64 range
    returns, at a twentieth of the per-call cost of `bytes`.
    """
    bitgen = getattr(source, "bit_generator", None)
    if isinstance(bitgen, _RAW64):
        return np.asarray(bitgen.random_raw(count), dtype=np.uint64).reshape(count)
    return np.frombuffer(source.bytes(8 * count), dtype="<u8").astype(np.uint64)


def bernoulli(source: Source, p: object) -> np.ndarray:
    """Independent exact Bernoulli(p) draws, one per entry of the double array `p` ⊂ [0, 1].

    The draw is "U < p" for an exact uniform U = 0.b₁b₂b₃…, decided 64 bits at a time. Write
    p·2⁶⁴ = P + f with P an integer and 0 ≤ f < 1 (both exact: scaling a double by 2⁶⁴ and
    splitting it into integer and fractional parts lose nothing). With W the next 64 bits of U:
    W < P ⇒ U < p; W > P ⇒ U > p; W = P (probability 2⁻⁶⁴) ⇒ the answer is "U' < f" for the
    rest U' of the expansion, decided the same way (and "no" at once when f = 0). So
    P(True) = (P + P(True | f))/2⁶⁴ = (P + f)/2⁶⁴ = p exactly, by induction on the levels.
    p's lowest set bit is at least 2⁻¹⁰⁷⁴, so f is 0 after at most ⌈1074/64⌉ = 17 levels: the
    draw always ends, and reads one word per entry with 0 < p < 1 plus one per tie (expected
    2⁻⁶⁴ per entry); p = 0 and p = 1 read nothing.
    """
    probs = np.asarray(p, dtype=np.float64)
    if np.any(~(probs >= 0.0) | (probs > 1.0)):
        raise InternalError("Bernoulli probabilities must lie in [0, 1]")
    out = np.zeros(probs.shape, dtype=bool)
    flat = out.reshape(-1)  # a view: writes land in `out`
    flat[probs.reshape(-1) == 1.0] = True
    pending = np.flatnonzero((probs > 0.0) & (probs < 1.0))  # flat indices still undecided
    rest = probs.reshape(-1)[pending]
    while pending.size:
        scaled = np.ldexp(rest, 64)  # < 2⁶⁴: p < 1
        whole = np.floor(scaled)
        words = random_words(source, pending.size)
        level = whole.astype(np.uint64)
        flat[pending[words < level]] = True
        tie = (words == level) & (scaled > whole)
        pending, rest = pending[tie], (scaled - whole)[tie]
    return out


def pick_by_cumulative(source: Source, boundary: Callable[[int], int], count: int) -> int:
    """The bucket j (0 ≤ j < count) with C_{j−1} ≤ U·T < C_j, for an exact uniform U ∈ [0, 1).

    `boundary(j)` = C_j are non-decreasing non-negative integers (C_{−1} = 0) and T = C_{count−1}
    > 0; bucket j has probability exactly (C_j − C_{j−1})/T (empty buckets are never picked).
    U is read 64 bits at a time: after s bits it is known to lie in [a/2^s, (a+1)/2^s), so
    U·T·2^s ∈ [a·T, a·T + T); the pick is returned as soon as that interval fits inside one
    bucket. Only the O(log count) boundaries a bisection visits are evaluated, so `boundary` may
    build each C_j on demand (e.g. from limbs). The loop ends with probability 1 (the U that
    straddle a boundary at every length form a null set).
    """
    total = boundary(count - 1) if count >= 1 else 0
    if total <= 0:
        raise InternalError("pick_by_cumulative needs at least one bucket of positive weight")
    if count == 1:
        return 0  # a point mass: nothing to draw
    numerator, shift = 0, 0
    while True:
        numerator = (numerator << 64) | int(random_words(source, 1)[0])
        shift += 64
        low = numerator * total
        j = bisect.bisect_right(range(count), low, key=lambda i: boundary(i) << shift)
        if low + total <= boundary(j) << shift:
            return j
