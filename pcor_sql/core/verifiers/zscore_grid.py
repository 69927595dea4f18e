"""Z-score checks of contexts far from the last one checked (uniform's draws), summed off the
grid of value combinations with fewer operations per cell than the walk's own sum.

A uniform draw differs from the draw before it in about half its values, so the walk
(`moment_walk`) cannot carry its state: it sums each draw afresh over its grid points
(`moment_walk._grid_alone`), ~2 ns a point (births: ~7,000 points a draw, 100,000 draws a
search that finds nothing: most of that release). Here the same sums read one row of three
doubles per grid point, in grid order (attribute 0 fastest): the count and "constant at v" as
one exact integer (count · 2²⁰ + 1 when the cell is not constant at v), Σs1 and Σs2; two
interleaved chains of additions per sum. No |s2| sum: s2 = Σ(x − shift)² ≥ 0 in every cell
(checked when the table is built), so Σ|s2| is Σs2.

Why the verdicts are the reference's: the state left is `moment_walk._set_alone`'s, the
batch of plain-double sums `_grid_alone` leaves, so `statistic_bounds` bounds G as it does
there — the sums are of the same terms in another order, within the same γ_k of their absolute
sum (k here the grid points summed, at least the cells summed: a wider bound, never a narrower
one) — and the undecided ones ask the reference kernel (`moment_kernel._moments`). The counts
are exact: every partial sum of the packed integers is below 2⁵³ (rows < 2³², cells < 2²⁰,
checked when the table is built). DESIGN.md §2 "Verifiers"; privacy: validity only, no cost.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import grid_offsets
from pcor_sql.core.jit import compiled
from pcor_sql.core.verifiers.moment_state import _GRID_SHARE, _grid_cells, _set_alone
from pcor_sql.core.verifiers.moment_walk import zscore_verdict

_CELL_BITS = 20  # the packed column: count · 2^20 + (1 if the cell is not constant at v)
_PACK = float(1 << _CELL_BITS)
NO_GRID = np.zeros((0, 3), dtype=np.float64)


def grid_table(stats: np.ndarray, v: float, index: np.ndarray) -> np.ndarray:
    """Per grid point of `index` (`jit.cell_index`) one row [count · 2²⁰ + not constant at v,
    Σs1, Σs2] (zeros where no cell is), from `stats` (`moment_kernel.cell_stats`); `NO_GRID`
    where the index keeps no grid or one of over `_GRID_SHARE` points a cell, the counts could pass 2⁵³ once packed, or a cell's s2 is
    negative (then the walk sums as before)."""
    cells = stats.shape[1]
    if index[0] <= 0 or cells >= 1 << _CELL_BITS or not np.all(stats[2] >= 0.0):
        return NO_GRID
    if float(stats[0].sum()) >= 2.0**32:
        return NO_GRID
    at = _grid_cells(index)
    if at.size == 0 or at.size > _GRID_SHARE * cells:  # as `walk_stats`: a grid this sparse is not summed
        return NO_GRID
    present = np.flatnonzero(at >= 0)
    c = at[present]
    out = np.zeros((at.size, 3), dtype=np.float64)
    constant = (stats[3] == v) & (stats[4] == v)
    out[present, 0] = stats[0, c] * _PACK + (~constant[c]).astype(np.float64)
    out[present, 1] = stats[1, c]
    out[present, 2] = stats[2, c]
    return out


@compiled
def _grid_sums(words, index, grid, sel, first, digit, out):
    """The context's grid points summed: out[0] = Σ packed, out[1] = Σs1, out[2] = Σs2,
    out[3] = Σ|s1|; returns the grid points summed (0 for an empty context)."""
    m = index[0]
    if not grid_offsets(0, words, index, -1, 0, sel, first):
        for i in range(4):
            out[i] = 0.0
        return 0
    for j in range(m):
        digit[j] = 0
    pk = d1 = d2 = b1 = 0.0
    qk = e1 = e2 = c1 = 0.0
    lo0, hi0 = first[0], first[1]
    pairs = lo0 + ((hi0 - lo0) >> 1) * 2
    rows = 0
    while True:
        base = 0
        for j in range(1, m):
            base += sel[first[j] + digit[j]]
        for p in range(lo0, pairs, 2):  # two chains: half the additions' latency
            g = base + sel[p]
            h = base + sel[p + 1]
            pk += grid[g, 0]
            qk += grid[h, 0]
            s = grid[g, 1]
            t = grid[h, 1]
            d1 += s
            e1 += t
            b1 += abs(s)
            c1 += abs(t)
            d2 += grid[g, 2]
            e2 += grid[h, 2]
        if pairs < hi0:
            g = base + sel[pairs]
            pk += grid[g, 0]
            s = grid[g, 1]
            d1 += s
            b1 += abs(s)
            d2 += grid[g, 2]
        rows += 1
        j = 1
        while j < m:
            digit[j] += 1
            if first[j] + digit[j] < first[j + 1]:
                break
            digit[j] = 0
            j += 1
        if j >= m:
            break
    out[0] = pk + qk
    out[1] = d1 + e1
    out[2] = d2 + e2
    out[3] = b1 + c1
    return rows * (hi0 - lo0)


@compiled
def zscore_grid(words, flat, index, stats, grid, state_i, state_f, shift, v, z, sel, first, digit, out):
    """(verdict, n) of `ZScore(z).check` on the context `words`, as `moment_walk.zscore_walk`
    answers it after `_grid_alone`; leaves the state fresh, as that does. `sel` (t), `first`
    (m + 1), `digit` (m) and `out` (4) are scratch."""
    k = _grid_sums(words, index, grid, sel, first, digit, out)
    total = np.int64(out[0])
    n = total >> _CELL_BITS
    eq = n if (total & ((1 << _CELL_BITS) - 1)) == 0 else np.int64(-1)  # only eq == n is read
    _set_alone(state_i, state_f, n, eq, k, out[1], out[2], out[3], out[2])
    return zscore_verdict(0, words, flat, index, stats, state_i, state_f, shift, v, z)
