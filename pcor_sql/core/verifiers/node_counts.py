"""A search node's neighbours checked from the node itself: one pass over the cells, then each
neighbour's rows per window value without moving a walk.

A BFS asks a node P's neighbours in one batch: each is P with one value b (of attribute i) added
or removed, so its population is P's plus or minus the slab {b} × P's values of every other
attribute. A walk (`window_counts.move`) checks them one after the other, each move undoing the
last neighbour's slab and taking the next one: two slabs a check — on the births shape about
7,600 cells and 250 µs after the full context. Here one pass over the cells sorts each into the
slabs it belongs to: a cell missing none of P's values is in P and in the slab of each of its own
values; a cell missing exactly one (attribute i's value b) is in the slab of b only (the slab of a
value P lacks); a cell missing two is in no neighbour. The pass adds each cell's rows and window
entries (`window_counts.window_entries`) to the slabs asked for (`slab_counts`), O(cells · m +
entries); then a neighbour's counts are P's ± its slab's, O(window values), and LOF reads them
outwards from v exactly as `lof_window_walk` does (`lof_counts`).

Exact: every neighbour's N and rows per window value are those a walk would carry (sums of the
same integers). A neighbour whose LOF reads past the window on a side that does not reach the
table's end needs the member runs beyond it (the walk's heap, or its widening): `lof_counts`
answers WALK and the caller checks that one through the walk, which computes the same score.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled_with
from pcor_sql.core.verifiers.lof_kernel import PLAIN_RULE, DISTINCT_RULE, _OK, _grown, _lof_buffered
from pcor_sql.core.verifiers.lof_walk import DONE, MODE, NEAR_AT, N_SIDE, STATE_SLOTS
from pcor_sql.core.verifiers.lof_window_walk import _WINDOW, _done_view, _fill_window
from pcor_sql.core.verifiers.window_counts import R_E0, R_ROWS

#: status: the neighbour's LOF reads past the window where the table goes on — ask the walk.
WALK = 6


@compiled_with(nogil=True)
def _has(words, b):
    return (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)


@compiled_with(nogil=True)
def slab_counts(words, flat, m, row_of_bit, rows_of, ent, marg_n, marg_cnt, cnt_p):
    """N of the node (words: its uint64 context words); into cnt_p its rows per window value, and
    for each bit b with row_of_bit[b] = r ≥ 0 into marg_n[r], marg_cnt[r] the rows and rows per
    window value of b's slab: the cells of value b whose other attributes' values are all the
    node's. flat: `jit.flat_bits` (its first m columns: each cell's bit per attribute)."""
    cells = flat.shape[0]
    t = row_of_bit.size
    missing = np.empty(t, dtype=np.int64)  # 1 where the node lacks the bit: a byte load, not a shift
    for b in range(t):
        missing[b] = 1 - _has(words, b)
    marg_n[:] = 0
    marg_cnt[:, :] = 0
    cnt_p[:] = 0
    n_p = 0
    for c in range(cells):
        miss = 0
        which = 0
        for g in range(m):
            lack = missing[flat[c, g]]
            miss += lack
            which = g if lack else which
        if miss > 1:
            continue
        rows = rows_of[c, R_ROWS]
        e0, e1 = rows_of[c, R_E0], rows_of[c + 1, R_E0]
        if miss == 0:
            n_p += rows
            for e in range(e0, e1):
                cnt_p[ent[2 * e]] += ent[2 * e + 1]
            lo, hi = 0, m
        else:
            lo, hi = which, which + 1
        for g in range(lo, hi):
            r = row_of_bit[flat[c, g]]
            if r < 0:
                continue
            marg_n[r] += rows
            for e in range(e0, e1):
                marg_cnt[r, ent[2 * e]] += ent[2 * e + 1]
    return n_p


@compiled_with(nogil=True, error_model="numpy")
def lof_counts(cnt, n, dv, left_end, right_end, wu, v, k, rule):
    """(LOF(V), status) of a context from its rows per window value `cnt` and N, as
    `lof_window_walk` computes it after its move; status WALK where that walk would go past the
    window through its heap (or widen it)."""
    cv = cnt[dv]
    if n < 2:
        return np.nan, _OK
    if cv == n:  # every row is v
        return (1.0 if rule == PLAIN_RULE else np.nan), _OK
    kk = min(k, n - 1) if rule == PLAIN_RULE else k
    if rule == PLAIN_RULE and cv - 1 >= kk:
        return 1.0, _OK
    st = np.zeros(STATE_SLOTS, dtype=np.int64)
    st[MODE], st[MODE + 1] = _WINDOW, _WINDOW
    st[NEAR_AT], st[NEAR_AT + 1] = dv - 1, dv + 1
    st[DONE], st[DONE + 1] = 2 * left_end, 2 * right_end  # 2: done once the window is read
    center = 4 * k + 16
    bv = np.empty(2 * center + 1)
    bc = np.empty(2 * center + 1)
    kd = np.full(2 * center + 1, np.nan)
    bv[center], bc[center] = v, float(cv)
    want_l = want_r = 2 * k + 4
    while True:
        for side in range(2):
            if st[DONE + side] == 1:
                continue
            _fill_window(side, want_r if side else want_l, st, bv, bc, center, cnt, wu)
            if st[MODE + side] == 1:
                return np.nan, WALK
        if rule == DISTINCT_RULE and kk == k:
            nl, nr = st[N_SIDE], st[N_SIDE + 1]
            if nl + nr < k and st[DONE] == 1 and st[DONE + 1] == 1:
                kk = nl + nr
                if kk == 0:
                    return np.nan, _OK
        score, status = _lof_buffered(v, float(cv), kk, rule, kd, bv, bc, center, _done_view(st))
        if status == _OK:
            return score, _OK
        want_l, want_r, bv, bc, kd, center = _grown(status, want_l, want_r, st, bv, bc, kd, center)


@compiled_with(nogil=True, error_model="numpy")
def lof_node_many(words, flips, flat, m, t, rows_of, ent, wu, dv, left_end, right_end, v, k, rule, scores, codes, ns):
    """LOF of each neighbour q of the node (words): the node with bit flips[q] toggled (distinct
    bits); scores[q], codes[q] (`lof_counts`' status), ns[q] (its N)."""
    q_n = flips.size
    row_of_bit = np.full(t, -1, dtype=np.int64)
    for q in range(q_n):
        row_of_bit[flips[q]] = q
    marg_n = np.empty(q_n, dtype=np.int64)
    marg_cnt = np.empty((q_n, wu.size), dtype=np.int64)
    cnt_p = np.empty(wu.size, dtype=np.int64)
    n_p = slab_counts(words, flat, m, row_of_bit, rows_of, ent, marg_n, marg_cnt, cnt_p)
    cnt = np.empty(wu.size, dtype=np.int64)
    for q in range(q_n):
        sign = -1 if _has(words, flips[q]) else 1
        for d in range(wu.size):
            cnt[d] = cnt_p[d] + sign * marg_cnt[q, d]
        n = n_p + sign * marg_n[q]
        ns[q] = n
        scores[q], codes[q] = lof_counts(cnt, n, dv, left_end, right_end, wu, v, k, rule)
