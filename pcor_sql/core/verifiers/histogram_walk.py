"""The compiled histogram check of a wide summary, flat in its member cells: N, min, max and the
context's rows per value near v carried along the moves (`window_counts`).

`histogram_kernel` finds the context's cells (`jit.member_cells_indexed`), sums N, min and max
over them and counts V's bin run by run: O(member cells) a check — 4.5 ms on an 85,680-cell
context. Here a walk keeps N, the member cells ranked by minimum and by maximum (so min and max
are read off two bitsets), and the window counts `cnt`. The bin's edges follow from N, min and
max exactly as there (`histogram_kernel.bin_interval`, shared); when V's bin [L, U] lies inside
the window [a, b] — every cell's rows with a ≤ x ≤ b are counted there — its count is the sum
of `cnt` over the window values in [L, U] (or [L, U)), found by two binary searches in the
window's values; else (a context so small that its bins are wider than the window) the member
cells are listed (`jit.listed_members`) and their runs counted by binary search. Either count is
the number of the context's values numpy puts in V's bin, so the verdict is the kernel's, and
FALLBACK (the reference decides) exactly where the kernel's is.

Costs per check: the move (its slab of cells and their window entries), two bitset scans
(cells/64 words at most, usually one), and the window values in V's bin.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled, first_position, listed_members
from pcor_sql.core.verifiers.histogram_kernel import COUNT, FALLBACK, bin_interval
from pcor_sql.core.verifiers.moment_kernel import FALSE, TRUE
from pcor_sql.core.verifiers.window_counts import S_N, highest_rank, lowest_rank, move


@compiled
def histogram_walk(x, words, dx, dwords, flat, index, rows_of, ent, wu, min_by_rank, max_by_rank, values, starts,
                   state, member, cnt, bits, scratch, window, v, rel):
    """(FALSE, TRUE or FALLBACK, n) of `Histogram(rel).check`, as `histogram_kernel`, the context
    given with its difference from the last one checked with this walk (`window_counts.new_walk`
    with ranks; rows_of: `window_counts.cell_rows` with ranks; min_by_rank / max_by_rank: the
    cells' minima / maxima in rank order, ascending; window: [a, b], the window's range)."""
    move(x, words, dx, dwords, flat, index, rows_of, ent, state, member, cnt, bits, scratch)
    n = state[S_N]
    if n == 0:
        return FALLBACK, n
    lo = min_by_rank[lowest_rank(bits, 0)]
    hi = max_by_rank[highest_rank(bits, 1)]
    code, left, right, closed = bin_interval(n, lo, hi, v)
    if code != COUNT:
        return code, n
    inside = 0
    if window[0] <= left and right <= window[1]:
        d0 = first_position(wu, 0, wu.size, left, False)
        d1 = first_position(wu, d0, wu.size, right, closed)
        for d in range(d0, d1):
            inside += cnt[d]
    else:
        cells = flat.shape[0]
        listed = scratch[cells + 1 : 2 * cells + 1]
        m = listed_members(x, words, index, member, listed)
        for j in range(m):
            c = listed[j]
            s, e = starts[c], starts[c + 1]
            first = first_position(values, s, e, left, False)
            inside += first_position(values, first, e, right, closed) - first
    return (TRUE if inside < rel * n else FALSE), n
