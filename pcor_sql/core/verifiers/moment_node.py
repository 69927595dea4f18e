"""A BFS node's neighbours checked by Grubbs or z-score from the node itself: one pass over the
cells gives the node's sums and every neighbour's slab's, then each neighbour's moments are the
node's ± its slab's, without moving the walk (`moment_state`).

A neighbour of the node P is P with one value b (of attribute i) added or removed: its
population is P's plus or minus the slab {b} × P's values of every other attribute. The walk
checks the neighbours one after the other, each move undoing the last neighbour's slab and
taking the next one: two slabs a check. Here, as `node_counts.slab_counts` does for LOF, one
pass sorts each cell into the slabs it belongs to (a cell missing none of P's values is in P
and in the slab of each of its own values; a cell missing exactly one is in that value's slab;
a cell missing two is in no neighbour) and adds its count, rows constant at v, Σs1, Σs2 and
their absolute values there (`walk_stats`' rows).

Why the verdicts are the reference's. N and the rows constant at v are sums of the same exact
integers as the walk's. Σs1 of a neighbour is P's plain-double sum ± its slab's: a summation
tree of the k_P + k_S terms passed through, so it errs from the exact sum by at most
γ_{k_P+k_S+1} times their absolute sum (Higham §4.2), which goes into the state's E exactly as
`moment_state._set_alone` puts a batch's — and Σ|s| of the neighbour (b_P − b_S for a removal)
errs by no more. `moment_walk.statistic_bounds` then bounds the reference's statistic from that
state as it does the walk's; where the bound cannot decide, the neighbour is summed by the
reference kernel itself (`moment_kernel._moments`), as the walk does.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import cell_lacks, lacked_bits, select_values
from pcor_sql.core.jit import compiled
from pcor_sql.core.verifiers.moment_kernel import FALSE, TRUE, _moments, grubbs_code
from pcor_sql.core.verifiers.moment_state import (
    _REL,
    _U,
    F_A1,
    F_A2,
    F_E1,
    F_E2,
    F_SIZE,
    F_T1,
    F_T2,
    F_W1,
    F_W2,
    I_EQ,
    I_HEAD,
    I_K,
    I_N,
)
from pcor_sql.core.verifiers.moment_walk import statistic_bounds

# Per slab (and the node): count, rows constant at v, cells; Σs1, Σs2, Σ|s1|, Σ|s2|.
S_N, S_EQ, S_K = 0, 1, 2
S_T1, S_T2, S_B1, S_B2 = 0, 1, 2, 3


@compiled
def node_slabs(words, flat, m, row_of_bit, ws, slab_i, slab_f):
    """The node's (row `slab_i.shape[0] − 1`) and, for each bit b with row_of_bit[b] = r ≥ 0,
    b's slab's (row r) integer and plain-double sums; `ws`: `walk_stats` (its first rows in the
    cells' order), `flat`: `jit.flat_bits` (its first m columns: each cell's bit per attribute)."""
    cells = flat.shape[0]
    t = row_of_bit.size
    node = slab_i.shape[0] - 1
    missing = lacked_bits(words, t)
    slab_i[:, :] = 0
    slab_f[:, :] = 0.0
    for c in range(cells):
        miss, which = cell_lacks(missing, flat, c, m)
        if miss > 1:
            continue
        if miss == 0:
            _add(node, c, ws, slab_i, slab_f)
            lo, hi = 0, m
        else:
            lo, hi = which, which + 1
        for g in range(lo, hi):
            r = row_of_bit[flat[c, g]]
            if r >= 0:
                _add(r, c, ws, slab_i, slab_f)


@compiled
def grid_slabs(words, index, row_of_bit, ws, cells, slab_i, slab_f):
    """`node_slabs` read off the grid of value combinations (`jit.cell_index`; `ws` with its
    rows in grid order too, `walk_stats`): the node's grid points, each added to the node and to
    the slab of each of its values asked for, then each asked-for value the node lacks × the
    node's values elsewhere — O(the node's points + those slabs), not O(cells). The same cells
    as `node_slabs`, summed in another order (the bound holds for any order). False, and
    nothing summed, when an attribute has no value in the node."""
    m = index[0]
    sel = np.empty(index[1], dtype=np.int64)  # per attribute the node's values (bits)
    first = np.empty(m + 1, dtype=np.int64)
    if not select_values(0, words, index, -1, 0, sel, first):
        return False
    stride = np.empty(m, dtype=np.int64)
    s = 1
    for j in range(m):
        stride[j] = s
        s *= index[3 + j] - index[2 + j]
    slab_i[:, :] = 0
    slab_f[:, :] = 0.0
    node = slab_i.shape[0] - 1
    _points(sel, first, -1, 0, index, stride, cells, row_of_bit, ws, node, slab_i, slab_f)
    for i in range(m):
        for b in range(index[2 + i], index[3 + i]):
            r = row_of_bit[b]
            if r >= 0 and not (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
                _points(sel, first, i, b, index, stride, cells, row_of_bit, ws, r, slab_i, slab_f)
    return True


@compiled
def _points(sel, first, fixed, fixed_bit, index, stride, cells, row_of_bit, ws, target, slab_i, slab_f):
    """Add the grid points of the node's values (attribute `fixed`, when ≥ 0, at `fixed_bit`
    alone) to row `target`; without a fixed attribute (the node itself) each point also to the
    slab of each of its values asked for."""
    m = index[0]
    digit = np.zeros(m, dtype=np.int64)
    while True:
        g = cells
        for j in range(m):
            b = fixed_bit if j == fixed else sel[first[j] + digit[j]]
            g += (b - index[2 + j]) * stride[j]
        if ws[g, 0] > 0.0:  # a grid point without a cell adds nothing
            _add(target, g, ws, slab_i, slab_f)
            if fixed < 0:
                for j in range(m):
                    r = row_of_bit[sel[first[j] + digit[j]]]
                    if r >= 0:
                        _add(r, g, ws, slab_i, slab_f)
        j = 0
        while j < m:
            if j != fixed:
                digit[j] += 1
                if first[j] + digit[j] < first[j + 1]:
                    break
                digit[j] = 0
            j += 1
        if j == m:
            return


@compiled
def _add(r, c, ws, slab_i, slab_f):
    count = ws[c, 0]
    s1 = ws[c, 1]
    s2 = ws[c, 2]
    slab_i[r, S_N] += np.int64(count)
    if ws[c, 3] != 0.0:
        slab_i[r, S_EQ] += np.int64(count)
    slab_i[r, S_K] += 1
    slab_f[r, S_T1] += s1
    slab_f[r, S_T2] += s2
    slab_f[r, S_B1] += abs(s1)
    slab_f[r, S_B2] += abs(s2)


@compiled
def _neighbour_state(q, sign, slab_i, slab_f, state_i, state_f):
    """The `moment_state` state of the node ± slab q: exact counts, and the sums with their
    error bound E (γ_k of the terms passed through, k = the cells of both plus the addition)."""
    p = slab_i.shape[0] - 1
    state_i[I_N] = slab_i[p, S_N] + sign * slab_i[q, S_N]
    state_i[I_EQ] = slab_i[p, S_EQ] + sign * slab_i[q, S_EQ]
    k = slab_i[p, S_K] + slab_i[q, S_K] + 1
    state_i[I_K] = k
    for j in range(F_SIZE):
        state_f[j] = 0.0
    gamma = k * _U / (1.0 - k * _U) * (1.0 + _REL)  # ≥ γ_k: the sums' and b's own error
    b1 = slab_f[p, S_B1] + slab_f[q, S_B1]
    b2 = slab_f[p, S_B2] + slab_f[q, S_B2]
    state_f[F_T1] = slab_f[p, S_T1] + sign * slab_f[q, S_T1]
    state_f[F_T2] = slab_f[p, S_T2] + sign * slab_f[q, S_T2]
    state_f[F_A1] = slab_f[p, S_B1] + sign * slab_f[q, S_B1]
    state_f[F_A2] = slab_f[p, S_B2] + sign * slab_f[q, S_B2]
    state_f[F_E1] = gamma * b1 * (1.0 + 2.0 * gamma)
    state_f[F_E2] = gamma * b2 * (1.0 + 2.0 * gamma)
    state_f[F_W1] = b1
    state_f[F_W2] = b2


@compiled
def moment_node_many(words, flips, flat, m, index, stats, ws, shift, v, grubbs, z, table, codes, ns):
    """Grubbs (grubbs = 1: `grubbs_walk`'s codes, with α's `table`) or z-score (0: threshold z,
    TRUE or FALSE) of each neighbour q of the node (words): the node with bit flips[q] toggled
    (distinct bits); codes[q], ns[q] (its N)."""
    q_n = flips.size
    t = words.size * 64  # every bit a context can hold
    row_of_bit = np.full(t, -1, dtype=np.int64)
    for q in range(q_n):
        row_of_bit[flips[q]] = q
    slab_i = np.empty((q_n + 1, 3), dtype=np.int64)
    slab_f = np.empty((q_n + 1, 4), dtype=np.float64)
    cells = flat.shape[0]
    if ws.shape[0] == cells or not grid_slabs(words, index, row_of_bit, ws, cells, slab_i, slab_f):
        node_slabs(words, flat, m, row_of_bit, ws, slab_i, slab_f)
    state_i = np.zeros(I_HEAD, dtype=np.int64)
    state_f = np.zeros(F_SIZE, dtype=np.float64)
    nw = words.copy()
    min_n = 3 if grubbs else 2
    for q in range(q_n):
        b = flips[q]
        bit = np.uint64(1) << np.uint64(b & 63)
        sign = -1 if words[b >> 6] & bit else 1
        _neighbour_state(q, sign, slab_i, slab_f, state_i, state_f)
        decided, n, g_lo, g_hi = statistic_bounds(state_i, state_f, shift, v, min_n)
        ns[q] = n
        if decided:
            if grubbs:
                low = grubbs_code(n, g_lo, table)
                if low == grubbs_code(n, g_hi, table):
                    codes[q] = low
                    continue
            elif g_lo > z:
                codes[q] = TRUE
                continue
            elif not g_hi > z:  # NaN (n < 2) included
                codes[q] = FALSE
                continue
        nw[b >> 6] ^= bit  # the reference kernel on this neighbour
        n2, g = _moments(0, nw, flat, index, stats, shift, v, min_n)
        nw[b >> 6] ^= bit
        ns[q] = n2
        if grubbs:
            codes[q] = grubbs_code(n2, g, table)
        else:
            codes[q] = TRUE if g > z else FALSE
