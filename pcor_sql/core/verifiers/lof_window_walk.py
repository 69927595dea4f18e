"""The compiled LOF check of a wide summary, flat in its member cells: the context's rows per
value near v are carried along the moves (`window_counts`), and the walk reads them outwards.

The previous check (`lof_kernel_walk`, kept as `benchmarks.width_checks`' baseline) carried the
member flags and N along the moves, but each check still found the context's values near v
cell by cell: the merged neighbourhood of ~4,096 rows a side holds
~20 distinct values of a tied integer metric, and past it (or for a context under 5% of the
rows) a heap over every member cell — 22 ms on an 85,680-cell context. Here the values come
from the window counts: side by side, the next non-zero count outwards from v is the context's
next distinct value with its number of rows, exactly what `lof_walk.fill` produces, so the
arithmetic (`lof_kernel._lof_buffered`, unchanged) computes the same score. Past the window on
a side that does not reach the table's end, a context of at most HEAP_CELLS member cells goes
on through the heap over the member runs just beyond it (`lof_walk._heap_init` on rows 2, 3 of
the record's positions, which are the window's edges), listing the member cells then
(`jit.listed_members`); a larger one answers WIDER, and its caller widens the window (for good:
the next checks carry the wider one) and asks again — so no check lists many cells, and the
window stays as narrow as the contexts checked so far need (a move pays its slab's entries in
the window: on the births shape the whole table's are ~4.3 a cell, a window near v's a few
tenths).

Costs per check: the move (its slab of cells and their window entries), the window values read
(3k' + 4 non-zero ones a side first, rarely more, zeros skipped eight at a time: `_next_nonzero`), O(k'²) arithmetic; the heap only
as above. The record's window: `engine.lof_checks.window_range`.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled_with, listed_members
from pcor_sql.core.verifiers.lof_kernel import (
    DISTINCT_RULE, PLAIN_RULE, _OK, _grown, _lof_buffered, unpack_record, F_V, I_K, I_RULE,
)
from pcor_sql.core.verifiers.lof_walk import DONE, FROM, HEAP_SIZE, MODE, N_SIDE, NEAR_AT, STATE_SLOTS, _heap_init, fill
from pcor_sql.core.verifiers.window_counts import S_CELLS, S_DV, S_LEND, S_N, S_REND, move

_WINDOW = 2  # MODE: the side reads the window counts (then 1: the heap, as `lof_walk.fill`)
#: status: the context reads past the window on a side that does not reach the table's end and
#: holds more than HEAP_CELLS member cells — the caller widens the window and checks again
#: (`engine.lof_checks`), where listing those cells for the heap would cost O(member cells).
WIDER = 5
HEAP_CELLS = 2048
FIRST_FILL = 3  # values a side first read: FIRST_FILL · k + 4


@compiled_with(nogil=True)
def _fill_window(side, target, st, bv, bc, center, cnt, wu):
    """Append the context's next distinct values on `side` from the window counts (as
    `lof_walk.fill`), until `target` or the buffer is full; at the window's end the side is done
    (the window reaches the table's end there: st[DONE + side] preset as 2) or turns to the heap
    (MODE 1)."""
    n = st[N_SIDE + side]
    cap = center - 1
    at = st[NEAR_AT + side]
    step = -1 if side == 0 else 1
    while n < target and n < cap:
        at = _next_nonzero(cnt, at, step)
        if not 0 <= at < cnt.size:
            if st[DONE + side] != 0:
                st[DONE + side] = 1
            else:
                st[MODE + side] = 1
            break
        idx = center - 1 - n if side == 0 else center + 1 + n
        bv[idx] = wu[at]
        bc[idx] = float(cnt[at])
        at += step
        n += 1
    st[NEAR_AT + side] = at
    st[N_SIDE + side] = n


@compiled_with(nogil=True, inline="always")
def _next_nonzero(cnt, at, step):
    """The first index from `at` on, in direction `step` (±1), whose count is not zero, or the
    first out of range: eight counts at a time, OR-ed without a branch between them — a
    wide5000 context holds ~4% of the window's rows, so a check passes ~2,000 zero counts to read
    ~90 values (1.2 µs one at a time)."""
    if step > 0:
        while at + 8 <= cnt.size and (cnt[at] | cnt[at + 1] | cnt[at + 2] | cnt[at + 3] | cnt[at + 4] | cnt[at + 5]
                                      | cnt[at + 6] | cnt[at + 7]) == 0:
            at += 8
        while at < cnt.size and cnt[at] == 0:
            at += 1
    else:
        while at >= 7 and (cnt[at] | cnt[at - 1] | cnt[at - 2] | cnt[at - 3] | cnt[at - 4] | cnt[at - 5]
                           | cnt[at - 6] | cnt[at - 7]) == 0:
            at -= 8
        while at >= 0 and cnt[at] == 0:
            at -= 1
    return at


@compiled_with(nogil=True, inline="always")
def settled(n, cv, k, rule):
    """(LOF, −1) where N and V's copies cv decide it before any value is read (N < 2, every row
    v, or the plain rule's v with k' copies besides V), else (NaN, k': the neighbours counted)."""
    if n < 2:
        return np.nan, -1
    if cv == n:  # every row is v
        return (1.0 if rule == PLAIN_RULE else np.nan), -1
    kk = min(k, n - 1) if rule == PLAIN_RULE else k
    if rule == PLAIN_RULE and cv - 1 >= kk:
        return 1.0, -1
    return np.nan, kk


@compiled_with(nogil=True, inline="always")
def window_start(dv, left_end, right_end, v, cv, k):
    """(state, values, counts, k-distances, center, first fill a side) of a read outwards from
    window value dv (v, with cv copies), each side reading the window first."""
    st = np.zeros(STATE_SLOTS, dtype=np.int64)
    st[MODE], st[MODE + 1] = _WINDOW, _WINDOW
    st[NEAR_AT], st[NEAR_AT + 1] = dv - 1, dv + 1
    st[DONE], st[DONE + 1] = 2 * left_end, 2 * right_end  # 2: done once the window is read
    center = 4 * k + 16
    bv = np.empty(2 * center + 1)
    bc = np.empty(2 * center + 1)
    kd = np.full(2 * center + 1, np.nan)
    bv[center], bc[center] = v, float(cv)
    return st, bv, bc, kd, center, 2 * k + 4


@compiled_with(nogil=True, error_model="numpy")
def lof_window_walk(x, words, dx, dwords, values, ints, floats, rows_of, ent, wu, state, member, cnt, bits, scratch):
    """(LOF(V), N, status) as `lof_kernel.lof_context` (same packed record, whose positions rows
    2, 3 are the window's edges), the context given with its difference from the last one
    checked with this walk (`window_counts.new_walk`; rows_of: `window_counts.cell_rows`; ent,
    wu: `window_counts.window_entries` and the window's distinct values)."""
    cells, starts, pos, near_c, flat, index, keys, near_v = unpack_record(ints, floats)
    v, k, rule = floats[F_V], ints[I_K], ints[I_RULE]
    move(x, words, dx, dwords, flat, index, rows_of, ent, state, member, cnt, bits, scratch)
    n, cv = state[S_N], cnt[state[S_DV]]  # the window holds v: its count is V's copies
    score, kk = settled(n, cv, k, rule)
    if kk < 0:
        return score, n, _OK
    st, bv, bc, kd, center, _ = window_start(state[S_DV], state[S_LEND], state[S_REND], v, cv, k)
    # A continuous metric's arithmetic reads ~3k values a side: 2k + 4 ran it twice in 75% of
    # the wide5000 checks, 3k + 4 once in all (11% less CPU a check; the score is the same).
    want_l = want_r = FIRST_FILL * k + 4
    st[FROM] = 2  # a heap starts just beyond the window
    inside = scratch[cells + 1 : 2 * cells + 1]
    m = -1  # the member cells, listed when a heap first needs them
    m_cells = state[S_CELLS]
    hk = np.empty((2, 0))
    hc = np.empty((2, 0), dtype=np.int64)
    hp = np.empty((2, 0), dtype=np.int64)
    while True:
        for side in range(2):
            target = want_r if side else want_l
            if st[DONE + side] == 1:
                continue
            if st[MODE + side] == _WINDOW:
                _fill_window(side, target, st, bv, bc, center, cnt, wu)
                if st[MODE + side] == 1:  # past the window: the member runs beyond it, through a heap
                    if m_cells > HEAP_CELLS:
                        return np.nan, n, WIDER
                    if m < 0:
                        m = listed_members(x, words, index, member, inside)
                    if hk.shape[1] == 0:
                        hk = np.empty((2, m_cells))
                        hc = np.empty((2, m_cells), dtype=np.int64)
                        hp = np.empty((2, m_cells), dtype=np.int64)
                    st[HEAP_SIZE + side] = _heap_init(side, member, inside, m, pos[2 + side], keys[2 + side], hk[side],
                                                      hc[side], hp[side])
            if st[MODE + side] == 1:
                fill(side, target, st, bv, bc, center, values, starts, member, inside, m, pos, keys, near_v, near_c,
                     hk[side], hc[side], hp[side])
        if rule == DISTINCT_RULE and kk == k:
            nl, nr = st[N_SIDE], st[N_SIDE + 1]
            if nl + nr < k and st[DONE] == 1 and st[DONE + 1] == 1:
                kk = nl + nr
                if kk == 0:
                    return np.nan, n, _OK
        score, status = _lof_buffered(v, float(cv), kk, rule, kd, bv, bc, center, _done_view(st))
        if status == _OK:
            return score, n, _OK
        want_l, want_r, bv, bc, kd, center = _grown(status, want_l, want_r, st, bv, bc, kd, center)


@compiled_with(nogil=True, inline="always")
def _done_view(st):
    """`st` as `_lof_buffered` reads it: DONE slots 0 or 1 (2, "done at the window's end", is
    not done yet)."""
    out = st.copy()
    for side in range(2):
        if out[DONE + side] == 2:
            out[DONE + side] = 0
    return out
