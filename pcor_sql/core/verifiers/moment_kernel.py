"""Grubbs and z-score checks compiled (numba): membership, moments and verdict in one call.

The reference is `Grubbs.check` / `ZScore.check` on a `SummaryPopulation` (engine/summary.py):
n, min and max over the member cells; when min < max, mean = shift + Σs1/n and
m2 = max(Σs2 − (Σs1)²/n, 0) with the sums taken by numpy over the member cells in ascending
order; then `studentized_distance`. The kernel performs the same IEEE operations in the same
order (`jit.numpy_sum` is numpy's pairwise summation; nothing is compiled with fastmath), so its
statistic is the reference's bit for bit and the verdicts are identical.

Grubbs' critical value needs t.ppf, which numba cannot call from cached code (a ctypes pointer to
scipy's `stdtrit` is 0.9 µs a call but makes the function uncacheable, so every CLI run would
recompile it). Instead `GrubbsTable` holds G_crit(α, N) computed by `grubbs_critical_one` (the
reference's own function) for every N ≤ 1,024 and for a geometric grid of N above (ratio
1 + 2⁻⁷). G_crit rises with N, so for N between grid points a and b, G ≤ G_crit(a)·(1 − 10⁻⁹)
proves "not an outlier" and G > G_crit(b)·(1 + 10⁻⁹) proves "outlier" (the margin absorbs the
rounding of stdtrit, ~10⁻¹⁵ relative); a G inside that narrow band (G_crit moves by ~0.1% between
grid points) is left undecided and the caller asks `grubbs_critical_one` itself.

Privacy: a verifier releases nothing by itself; validity-only steps cost nothing (DESIGN.md §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pcor_sql.core.jit import compiled, member_cells_indexed, numpy_sum
from pcor_sql.core.verifiers.grubbs import grubbs_critical_one

EXACT_UP_TO = 1024
_RATIO = 1.0 + 2.0**-7
_MARGIN = 1e-9

FALSE, TRUE, UNDECIDED = 0, 1, 2


@dataclass(frozen=True)
class GrubbsTable:
    """G_crit(α, N) at the sizes `n` (every N ≤ EXACT_UP_TO, then a geometric grid up to at
    least `n_max`), ascending; NaN for N < 3."""

    n: np.ndarray  # int64
    crit: np.ndarray  # float64


@lru_cache(maxsize=64)
def grubbs_table(alpha: float, n_max: int) -> GrubbsTable:
    """The critical values a compiled Grubbs check reads for populations of ≤ n_max rows."""
    sizes = list(range(EXACT_UP_TO + 1))
    x = float(EXACT_UP_TO)
    while sizes[-1] < n_max:
        x *= _RATIO
        sizes.append(max(sizes[-1] + 1, int(x)))
    n = np.asarray(sizes, dtype=np.int64)
    # The reference's own function (~2,000 calls, a few ms once per α): equal by construction.
    return GrubbsTable(n, np.array([grubbs_critical_one(alpha, int(k)) for k in sizes], dtype=np.float64))


def cell_stats(count: np.ndarray, s1: np.ndarray, s2: np.ndarray, vmin: np.ndarray, vmax: np.ndarray) -> np.ndarray:
    """The per-cell arrays a kernel reads, as the rows of one (5, cells) float64 array (one
    argument instead of five: each array argument costs ~0.15 µs of numba's dispatch). Counts
    are exact as doubles (< 2⁵³) and so are their sums."""
    return np.ascontiguousarray(np.vstack([count, s1, s2, vmin, vmax]), dtype=np.float64)


def table_rows(table: GrubbsTable) -> np.ndarray:
    """`table` as one (2, sizes) float64 array: sizes (exact as doubles), critical values."""
    return np.ascontiguousarray(np.vstack([table.n, table.crit]), dtype=np.float64)


@compiled
def member_span(x, words, flat, index, stats, scratch):
    """(k, n, min, max) of the context: its k member cells (written to `scratch`), its rows
    and the smallest and largest value among them (`stats`: `cell_stats`; `index`:
    `jit.cell_index`)."""
    k = member_cells_indexed(x, words, flat, index, scratch)
    total = 0.0
    lo = math.inf
    hi = -math.inf
    for j in range(k):
        c = scratch[j]
        total += stats[0, c]
        if stats[3, c] < lo:
            lo = stats[3, c]
        if stats[4, c] > hi:
            hi = stats[4, c]
    return k, np.int64(total), lo, hi


@compiled
def _moments(x, words, flat, index, stats, shift, v, min_n):
    """(n, statistic): |v − mean|/s of the context's population (see `studentized_distance`);
    NaN when n < min_n, 0.0 when s = 0. `stats` rows: count, s1, s2, min, max per cell."""
    scratch = np.empty(flat.shape[0], dtype=np.int64)
    k, n, lo, hi = member_span(x, words, flat, index, stats, scratch)
    if n < min_n:
        return n, math.nan
    if lo == hi:
        return n, 0.0
    a = np.empty(k)
    b = np.empty(k)
    for j in range(k):
        a[j] = stats[1, scratch[j]]
        b[j] = stats[2, scratch[j]]
    t1 = numpy_sum(a, k)
    t2 = numpy_sum(b, k)
    mean = shift + t1 / n
    m2 = t2 - t1 * t1 / n
    if 0.0 > m2:  # Python's max(m2, 0.0)
        m2 = 0.0
    s = math.sqrt(m2 / (n - 1))
    if not s > 0:
        return n, 0.0
    return n, abs(v - mean) / s


@compiled
def zscore_kernel(x, words, flat, index, stats, shift, v, z):
    """(verdict, n) of `ZScore(z).check` on the context (x, words: `jit.context_words`)."""
    n, g = _moments(x, words, flat, index, stats, shift, v, 2)
    return (TRUE if g > z else FALSE), n


@compiled
def grubbs_kernel(x, words, flat, index, stats, shift, v, table):
    """(FALSE, TRUE or UNDECIDED, n) of `Grubbs(α).check`, with α's `table_rows`."""
    n, g = _moments(x, words, flat, index, stats, shift, v, 3)
    return grubbs_code(n, g, table), n


@compiled
def grubbs_code(n, g, table):
    """FALSE, TRUE or UNDECIDED for statistic g of a population of n (`table`: `table_rows`):
    non-decreasing in g (FALSE below, UNDECIDED in a narrow band, TRUE above) for each n."""
    if not g > 0:  # NaN (n < 3) and 0.0 (s = 0) are never outliers
        return FALSE
    if n <= EXACT_UP_TO:
        return TRUE if g > table[1, n] else FALSE
    size = float(n)
    lo, hi = EXACT_UP_TO, table.shape[1]  # sizes[lo] ≤ n; find the last such index
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if table[0, mid] <= size:
            lo = mid
        else:
            hi = mid
    j = lo
    if table[0, j] == size:
        return TRUE if g > table[1, j] else FALSE
    if j + 1 >= table.shape[1]:
        return UNDECIDED
    if g <= table[1, j] * (1.0 - _MARGIN):
        return FALSE
    if g > table[1, j + 1] * (1.0 + _MARGIN):
        return TRUE
    return UNDECIDED
