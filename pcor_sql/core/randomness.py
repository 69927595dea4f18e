"""Sources of randomness. Real releases draw from the operating system's CSPRNG; a seed gives a
reproducible `numpy.random.Generator` for tests and benchmarks, labelled not for real releases.

Every mechanism takes a source as an argument: there is no module-level random state.
"""

from __future__ import annotations

import os
from typing import Protocol, Union

import numpy as np

_TWO_POW_M52 = 2.0**-52


class RandomSource(Protocol):
    def random(self, size: int | None = None) -> np.ndarray | float: ...

    def integers(self, low: int, high: int | None = None) -> int: ...


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


def uniform_open(source: Source, size: int) -> np.ndarray:
    """`size` uniforms strictly inside (0, 1) from either kind of source."""
    u = np.asarray(source.random(size), dtype=np.float64)
    # numpy's Generator can return exactly 0.0; nudge to the smallest positive double instead.
    return np.where(u <= 0.0, np.nextafter(0.0, 1.0), u)
