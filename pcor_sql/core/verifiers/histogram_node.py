"""A search node's neighbours checked by the histogram verifier from the node itself
(`node_counts`' pass, keeping each slab's extremes too, then each neighbour's N, min, max and
rows per window value without moving a walk).

`histogram_walk`'s verdict needs a context's N, min, max (the bins' edges, `bin_interval`) and
its rows per window value in V's bin. Each neighbour of a node P is P with one value b (of
attribute i) added or removed: its N and window counts are P's ± the slab of b's
(summed as `node_counts.slab_counts` sums them: exact integers). Min and max do not subtract,
so the same pass also keeps, for every bit b, the least minimum and greatest maximum over b's slab — P's cells holding
b when P has b, else the cells missing only b. An added value's neighbour takes P's extremes and
its slab's; a removed value's takes the extremes over the slabs of attribute i's other values in
P (P's cells partition by their value of i). So N, min, max and every window count are those a
walk would carry, and so are the edges and the bin's count: the same verdicts. A neighbour whose
bin runs past the window (a context so small its bins are wider) answers WALK and the caller
checks it through the walk; FALLBACK and N = 0 come back as `histogram_walk` returns them.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled_with, first_position
from pcor_sql.core.verifiers.histogram_kernel import COUNT, FALLBACK, bin_interval
from pcor_sql.core.verifiers.moment_kernel import FALSE, TRUE
from pcor_sql.core.verifiers.node_counts import WALK, slab_counts


@compiled_with(nogil=True)
def histogram_node_many(words, flips, attr_of, offsets, flat, m, t, rows_of, ent, wu, vmin, vmax, window, v, rel,
                        codes, ns):
    """`histogram_walk`'s (code, n) of each neighbour q of the node (words): the node with bit
    flips[q] toggled (distinct bits; attr_of: each bit's attribute, offsets: each attribute's
    first bit, and t past the last); codes[q] WALK where V's bin leaves the window."""
    q_n = flips.size
    n_p, marg_n, marg_cnt, cnt_p, lo_of, hi_of = slab_counts(words, flips, flat, m, t, rows_of, ent, wu.size, vmin,
                                                             vmax, True)
    # The node's extremes: those of attribute 0's slabs in the node (they partition its cells).
    lo_p, hi_p = np.inf, -np.inf
    for b in range(offsets[0], offsets[1]):
        if (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
            lo_p, hi_p = min(lo_p, lo_of[b]), max(hi_p, hi_of[b])
    for q in range(q_n):
        f = flips[q]
        has = (words[f >> 6] >> np.uint64(f & 63)) & np.uint64(1)
        sign = -1 if has else 1
        n = n_p + sign * marg_n[q]
        ns[q] = n
        if n == 0:
            codes[q] = FALLBACK
            continue
        if has:  # removed: the extremes of attribute i's other values in the node
            lo, hi = np.inf, -np.inf
            i = attr_of[f]
            for b in range(offsets[i], offsets[i + 1]):
                if b != f and (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
                    lo, hi = min(lo, lo_of[b]), max(hi, hi_of[b])
        else:
            lo, hi = min(lo_p, lo_of[f]), max(hi_p, hi_of[f])
        code, left, right, closed = bin_interval(n, lo, hi, v)
        if code != COUNT:
            codes[q] = code
            continue
        if not (window[0] <= left and right <= window[1]):
            codes[q] = WALK
            continue
        d0 = first_position(wu, 0, wu.size, left, False)
        d1 = first_position(wu, d0, wu.size, right, closed)
        inside = 0
        for d in range(d0, d1):
            inside += cnt_p[d] + sign * marg_cnt[q, d]
        codes[q] = TRUE if inside < rel * n else FALSE
