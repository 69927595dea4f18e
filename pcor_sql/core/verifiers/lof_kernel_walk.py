"""The compiled LOF check with the context carried along the moves, for wide summaries
(`python -m benchmarks scale --cases wide500,wide5000`) — as it was before `lof_window_walk`,
which the checks use now; kept as the reference that `python -m benchmarks width-checks` times
the window walk against in the same run.

`lof_kernel.lof_context` pays O(cells) per check before its walk: the membership of every
cell, a flag array, and one pass over the member cells for N, V's copies, min and max. Here a
state keeps the last context's member flags and those counts, and the next context costs only
the cells of the values that differ (`jit.cell_index`), as in `moment_walk`; a move touching more
than half the cells recounts afresh. What the walk then reads is the same: the member flags for
the merged neighbourhood, and the member cells — listed only when the context is too small for
the neighbourhood, where the heap starts at v (else `lof_walk.fill` reads them off the flags if
it ever needs the heap) — so the score is `lof_kernel.walk_score`'s, number for number.

The prologue's min and max are replaced by two exact facts the caller checks once per record:
the table's values span less than FAR / 4 (so no context is too wide), and V's own cell holds v
(so a context is constant — lo = hi — exactly when its rows constant at v are all its rows).
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import moved_cells
from pcor_sql.core.jit import compiled_with, listed_members, member_cells_indexed
from pcor_sql.core.verifiers.lof_kernel import (
    F_HEAD, F_SHARE, F_V, I_BELOW, I_CELLS, I_HEAD, I_K, I_NEAR, I_RULE, I_UPTO, I_WIDTH, PLAIN_RULE, _OK, walk_score, unpack_record,
)

# state: [fresh, N, V's copies, member cells with rows, rows constant at v]; flags in `member`
S_FRESH, S_N, S_CV, S_CELLS, S_EQ, S_SIZE = 0, 1, 2, 3, 4, 5


def new_state(cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(state, member) of a check with no context yet."""
    state = np.zeros(S_SIZE, dtype=np.int64)
    state[S_FRESH] = 1
    return state, np.zeros(cells, dtype=np.bool_)


def cell_counts(starts: np.ndarray, pos: np.ndarray, keys: np.ndarray, v: float) -> np.ndarray:
    """Per cell one row [rows, copies of v, rows if every row is v else 0] (`lof_walk`'s
    positions and keys): a move reads one cache line per cell it moves instead of five."""
    rows = np.diff(starts)
    constant = (keys[4] == v) & (keys[5] == v)
    return np.ascontiguousarray(np.stack([rows, pos[1] - pos[0], np.where(constant, rows, 0)], axis=1),
                                dtype=np.int64)


@compiled_with(nogil=True)
def _count(c, sign, counts, state):
    rows = counts[c, 0]
    if rows > 0:
        state[S_N] += sign * rows
        state[S_CV] += sign * counts[c, 1]
        state[S_CELLS] += sign
        state[S_EQ] += sign * counts[c, 2]


@compiled_with(nogil=True)
def _move(x, words, dx, dwords, flat, index, counts, state, member):
    """Bring (state, member) to the context (x, words) from the last one (differing in the bits
    dx, dwords: `cell_moves.moved_cells`), or afresh."""
    cells, width = flat.shape
    if state[S_FRESH] == 0 and index[0] > 0:
        out = np.empty(cells // 2 + 1, dtype=np.int64)
        leaving, total = moved_cells(x, words, dx, dwords, flat, index, out)
        if leaving >= 0:
            for j in range(total):
                c = out[j]
                if j < leaving:
                    if member[c]:
                        member[c] = False
                        _count(c, -1, counts, state)
                elif not member[c]:
                    member[c] = True
                    _count(c, 1, counts, state)
            return
    member[:] = False
    for j in range(1, S_SIZE):
        state[j] = 0
    scratch = np.empty(cells, dtype=np.int64)
    k = member_cells_indexed(x, words, flat, index, scratch)
    for j in range(k):
        member[scratch[j]] = True
        _count(scratch[j], 1, counts, state)
    state[S_FRESH] = 0


@compiled_with(nogil=True, error_model="numpy")
def lof_context_walk(x, words, dx, dwords, values, ints, floats, counts, state, member):
    """(LOF(V), N, status) as `lof_kernel.lof_context` (same packed record), the context given
    with its difference from the last one checked with this (state, member); `counts`:
    `cell_counts` of the record."""
    cells, starts, pos, near_c, flat, index, keys, near_v = unpack_record(ints, floats)
    v, k, rule, near_share = floats[F_V], ints[I_K], ints[I_RULE], floats[F_SHARE]
    _move(x, words, dx, dwords, flat, index, counts, state, member)
    n, cv = state[S_N], state[S_CV]
    if n < 2:
        return np.nan, n, _OK
    if state[S_EQ] == n:
        return (1.0 if rule == PLAIN_RULE else np.nan), n, _OK
    kk = min(k, n - 1) if rule == PLAIN_RULE else k
    if rule == PLAIN_RULE and cv - 1 >= kk:
        return 1.0, n, _OK
    inside = np.empty(cells, dtype=np.int64)
    m = -1
    if not (near_v.size > 0 and float(n) >= near_share * float(starts[starts.size - 1] - starts[0])):
        m = listed_members(x, words, index, member, inside)  # the heap starts at v: list them
    return walk_score(values, starts, member, inside, m, pos, keys, near_v, near_c, v, ints[I_BELOW], ints[I_UPTO],
                      near_share, k, rule, n, cv, state[S_CELLS], kk)
