"""The histogram verifier: V is an outlier iff V's bin holds fewer than rel·N values.

Bins are exactly `numpy.histogram(values, bins=⌈√N⌉)`'s: b equal-width bins over [min, max]
(widened to [min − 0.5, max + 0.5] when min == max), edges from `np.linspace`, the last bin
right-closed. numpy assigns a value to a bin by arithmetic, ⌊(x − first)/(last − first)·b⌋,
then corrects once with edge comparisons (numpy/lib/_histograms_impl.py, `histogram`). That
corrected index c(x) is non-decreasing in x (a value can only move one bin, towards its edge
interval), so the values numpy puts in bin i form one interval [L, U) — [L, U] for the last
bin — and one `count_between` gives numpy's count for V's bin bit for bit. L and U are
edges[i], edges[i+1] whenever c agrees with the edges there (always, in practice); otherwise
they are found by bisection over the ordered doubles, so the count is exact either way.

The values themselves are never fetched: min, max, n and one range count suffice, which the
engine answers from its sorted index.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from pcor_sql.core.verifiers.capabilities import Capabilities, Reads
from pcor_sql.core.verifiers.base import Population, certificate
from pcor_sql.core.verifiers.verifier_options import fixed, store_real
from pcor_sql.errors import UserError


def bin_count_for(n: int) -> int:
    """⌈√n⌉ computed exactly in integers (no float rounding for large n)."""
    r = math.isqrt(n)
    return r if r * r == n else r + 1


def _numpy_bin_index(x: float, first: float, denom: float, b: int, edges: np.ndarray) -> int:
    """numpy.histogram's bin index for one value x with first ≤ x ≤ last (same float ops)."""
    i = int((x - first) / denom * b)
    if i == b:
        i -= 1
    if x < edges[i]:
        i -= 1
    elif x >= edges[i + 1] and i != b - 1:
        i += 1
    return i


def _ordered(x: float) -> int:
    """An integer key that orders doubles like their values (−0.0 and 0.0 share a key)."""
    (bits,) = struct.unpack("<q", struct.pack("<d", x))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def _from_ordered(key: int) -> float:
    bits = key if key >= 0 else (-key) | (-0x8000000000000000)
    (x,) = struct.unpack("<d", struct.pack("<q", bits))
    return x


def _first_at_least(index: Callable[[float], int], target: int, lo: float, hi: float) -> float:
    """The smallest double x in [lo, hi] with index(x) ≥ target (index non-decreasing, index(hi) ≥ target)."""
    a, z = _ordered(lo), _ordered(hi)
    while a < z:
        mid = (a + z) // 2
        if index(_from_ordered(mid)) >= target:
            z = mid
        else:
            a = mid + 1
    return _from_ordered(a)


def numpy_bin_of(pop: Population) -> tuple[int, float, float, bool, int]:
    """(i, L, U, right_closed, b): V's numpy bin and the value interval numpy maps to it.

    Only for a non-constant population (min < max); a constant one is one full bin.
    """
    n, lo, hi, v = int(pop.n), float(pop.min), float(pop.max), float(pop.v)
    b = bin_count_for(n)
    edges = np.linspace(lo, hi, b + 1)
    if np.any(edges[:-1] >= edges[1:]):
        raise UserError(
            f"the histogram verifier cannot split the range [{lo!r}, {hi!r}] into {b} bins "
            "(too few representable values)",
            "rescale the metric or use another verifier, e.g. zscore",
        )
    denom = hi - lo

    def index(x: float) -> int:
        return _numpy_bin_index(x, lo, denom, b, edges)

    i = index(v)
    if i == 0:
        left = lo
    else:
        left = float(edges[i])
        if not (index(left) >= i and index(math.nextafter(left, -math.inf)) < i):
            left = _first_at_least(index, i, lo, hi)
    if i == b - 1:
        return i, left, hi, True, b
    right = float(edges[i + 1])
    if not (index(right) >= i + 1 and index(math.nextafter(right, -math.inf)) <= i):
        right = _first_at_least(index, i + 1, lo, hi)
    return i, left, right, False, b


def bin_count_of_v(pop: Population) -> int:
    """numpy.histogram(values, bins=⌈√N⌉)'s count for V's bin, from one range count."""
    if pop.min == pop.max:
        return int(pop.n)
    _, left, right, right_closed, _ = numpy_bin_of(pop)
    return int(pop.count_between(left, right, right_closed))


@dataclass(frozen=True)
class Histogram:
    """`histogram(rel=0.0025)`: outlier iff V's bin count < rel·N (numpy.histogram's bins)."""

    rel: float = 0.0025
    name: str = fixed("histogram")
    capabilities: ClassVar[Capabilities] = Capabilities(Reads.NEAR, deterministic=True, label="histogram")

    def __post_init__(self) -> None:
        store_real(self, "rel", low=0.0, high=1.0, low_closed=False, high_closed=True, example=0.0025)

    def score(self, pop: Population) -> float:
        """The share of the population in V's bin (compared with rel)."""
        return bin_count_of_v(pop) / int(pop.n)

    def check(self, pop: Population) -> bool:
        # A constant population is one bin holding all N ≥ rel·N values: never an outlier.
        return bin_count_of_v(pop) < self.rel * int(pop.n)

    def certificate(self, pop: Population) -> dict[str, Any]:
        """The count of V's bin against rel·N, for the data owner (never released)."""
        return certificate("bin count", bin_count_of_v(pop), self.rel * int(pop.n), "bin count < rel · N", pop)

    def options(self) -> dict[str, Any]:
        return {"rel": self.rel}
