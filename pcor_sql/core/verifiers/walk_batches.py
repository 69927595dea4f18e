"""Many contexts checked in one compiled call: the walks' kernels in a loop over a matrix of
contexts, so that a search's batch of questions (a BFS node's neighbours, a run of uniform
draws) pays numba's dispatch and the interpreter once, not per context.

Each driver takes `ctx` (contexts × words, uint64: bit b of context q is bit b % 64 of
ctx[q, b // 64]) and `prev`, the words of the context the walk's state holds (zeros for a fresh
state, which sums afresh whatever the difference), and checks the contexts in order, each
against the one before it, exactly as the same kernel called once per context with
`context_words` of it and of its difference (`engine.compiled_checks`): same kernel, same state
transitions, so the same verdicts and sizes. Outputs go to `codes` (the kernel's code, or LOF's
score in `scores` with its status in `codes`) and `ns` (population sizes).

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled
from pcor_sql.core.verifiers.histogram_walk import histogram_walk
from pcor_sql.core.verifiers.lof_window_walk import lof_window_walk
from pcor_sql.core.cell_moves import grid_size
from pcor_sql.core.verifiers.moment_state import _ALONE_SHARE, I_FRESH
from pcor_sql.core.verifiers.moment_walk import grubbs_walk, zscore_walk
from pcor_sql.core.verifiers.zscore_grid import zscore_grid


@compiled
def _diff(row, last, d):
    for w in range(row.size):
        d[w] = row[w] ^ last[w]


@compiled
def zscore_many(ctx, prev, flat, index, stats, ws, grid, state_i, state_f, shift, v, z, codes, ns):
    """`moment_walk.zscore_walk` on each row of `ctx` in turn; where the walk would sum the
    context alone off the grid (its state fresh, the context at most 1/_ALONE_SHARE of the
    cells in grid points: uniform's draws), `zscore_grid` instead — the same verdict and size
    and the same kind of state left, in fewer operations a grid point (`grid`:
    `zscore_grid.grid_table`, empty where it does not apply)."""
    d = np.empty(ctx.shape[1], dtype=np.uint64)
    last = prev.copy()
    cells = flat.shape[0]
    m, t = max(index[0], 0), max(index[1], 0)
    sel, first, digit = np.empty(t, dtype=np.int64), np.empty(m + 1, dtype=np.int64), np.zeros(m, dtype=np.int64)
    out = np.zeros(4)
    for q in range(ctx.shape[0]):
        row = ctx[q]
        if grid.shape[0] > 0 and state_i[I_FRESH] != 0:
            size = grid_size(0, row, index)
            if 0 <= size and size * _ALONE_SHARE <= cells:
                codes[q], ns[q] = zscore_grid(row, flat, index, stats, grid, state_i, state_f, shift, v, z,
                                              sel, first, digit, out)
                last[:] = row
                continue
        _diff(row, last, d)
        codes[q], ns[q] = zscore_walk(0, row, 0, d, flat, index, stats, ws, state_i, state_f, shift, v, z)
        last[:] = row


@compiled
def grubbs_many(ctx, prev, flat, index, stats, ws, state_i, state_f, shift, v, table, codes, ns):
    """`moment_walk.grubbs_walk` on each row of `ctx` in turn."""
    d = np.empty(ctx.shape[1], dtype=np.uint64)
    last = prev.copy()
    for q in range(ctx.shape[0]):
        row = ctx[q]
        _diff(row, last, d)
        codes[q], ns[q] = grubbs_walk(0, row, 0, d, flat, index, stats, ws, state_i, state_f, shift, v, table)
        last[:] = row


@compiled
def lof_many(ctx, prev, values, ints, floats, rows_of, ent, wu, state, member, cnt, bits, scratch, scores, codes, ns):
    """`lof_window_walk.lof_window_walk` on each row of `ctx` in turn (one walk state)."""
    d = np.empty(ctx.shape[1], dtype=np.uint64)
    last = prev.copy()
    for q in range(ctx.shape[0]):
        row = ctx[q]
        _diff(row, last, d)
        scores[q], ns[q], codes[q] = lof_window_walk(0, row, 0, d, values, ints, floats, rows_of, ent, wu, state,
                                                     member, cnt, bits, scratch)
        last[:] = row


@compiled
def histogram_many(ctx, prev, flat, index, rows_of, ent, wu, min_by_rank, max_by_rank, values, starts, state, member,
                   cnt, bits, scratch, window, v, rel, codes, ns):
    """`histogram_walk.histogram_walk` on each row of `ctx` in turn (one walk state)."""
    d = np.empty(ctx.shape[1], dtype=np.uint64)
    last = prev.copy()
    for q in range(ctx.shape[0]):
        row = ctx[q]
        _diff(row, last, d)
        codes[q], ns[q] = histogram_walk(0, row, 0, d, flat, index, rows_of, ent, wu, min_by_rank, max_by_rank,
                                         values, starts, state, member, cnt, bits, scratch, window, v, rel)
        last[:] = row


def context_matrix(masks: list[int], n_words: int) -> np.ndarray:
    """The contexts `masks` as rows of uint64 words (little-endian: bit b in word b // 64)."""
    width = 8 * n_words
    raw = b"".join(m.to_bytes(width, "little") for m in masks)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(masks), n_words)


def words_of(mask: int | None, n_words: int) -> np.ndarray:
    """One context's words (zeros for None: a fresh state)."""
    if mask is None:
        return np.zeros(n_words, dtype=np.uint64)
    return context_matrix([mask], n_words)[0].copy()
