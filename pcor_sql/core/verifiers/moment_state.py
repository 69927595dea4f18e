"""The population a Grubbs or z-score check carries from one context to the next (its verdicts:
`moment_walk`; a BFS node's neighbours without moving it: `moment_node`).

A search checks contexts one move apart (a descent removes one value, BFS and the sweeps try
the neighbours of one context in turn), so two contexts checked in a row usually differ in one
or two values: only the cells holding those values enter or leave the population. A check
object keeps the last context's member cells (a flag per cell) and its population's count N,
the rows of cells constant at v, and the sums Σs1, Σs2, Σ|s1|, Σ|s2| in double-double
arithmetic; the next context costs the cells of the values that differ (`jit.cell_index`),
or, when they are many, one indexed membership (`jit.member_cells_indexed`) and a fresh sum;
of those values' cells only the slice matching the rest of the context (`core.cell_moves`).

The kept sums' error bounds (E, W) and why they hold are `moment_walk`'s module doc.

The state is summed afresh after 2²⁰ cells entered or left (which bounds the double-double
drift by 2⁻⁷⁸·W) or when the terms passed through it (`W`) exceed 2²⁰ times the population's
own (which keeps that bound small beside γ_L).
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import (
    grid_members,
    grid_selection,
    grid_size,
    moved_cells,
    next_digit,
)
from pcor_sql.core.jit import compiled, member_cells_indexed

_REL = 1e-11  # relative widening per step (one rounding is ≤ 1.1e-16)
_GAMMA = 128 * 2.0**-53 * 1.001  # pairwise summation's γ_L for L ≤ 128 (cells < 2^100)
# The double-double sums' drift, relative to the terms passed through (W): each addition errs
# by ≤ 6u²·W, and a state makes at most _MAX_OPS of them before it is summed afresh.
_DRIFT = 2.0**-78
_MAX_OPS = 1 << 20
_RESET = 2.0**20  # fresh sums once W exceeds this many times the population's Σ|terms|
# state_i: [fresh, n, rows constant at v, member cells, cells entered or left, whether the full
# context's state is saved, that state's n, eq, k, ops, then a flag per cell, then scratch]
I_FRESH, I_N, I_EQ, I_K, I_OPS, I_SAVED, I_HEAD = 0, 1, 2, 3, 4, 5, 10
I_FULL = I_SAVED + 1  # the full context's n, eq, k, ops
# state_f: double-double (hi, lo) of Σs1, Σs2, Σ|s1|, Σ|s2|, then W1, W2 (plain, monotone), then
# E1, E2: bounds on the error the moves' batch sums (plain doubles) added to the s1 and s2 sums
F_T1, F_T2, F_A1, F_A2, F_W1, F_W2, F_E1, F_E2, F_SIZE = 0, 2, 4, 6, 8, 9, 10, 11, 12
F_FULL = F_SIZE  # then the full context's state_f[:F_SIZE]
_U = 2.0**-53
_STALE = 2.0**-24  # fresh sums once a move's batch errors (E) pass this share of the terms
#: A jump to a context of at most 1/_ALONE_SHARE of the cells in grid points sums its members
#: alone (`_alone`) rather than walking from the full context or summing every cell's flag.
_ALONE_SHARE = 2
#: `walk_stats` keeps its rows in grid order too when the grid has at most this many points a cell.
_GRID_SHARE = 4


def walk_stats(stats: np.ndarray, v: float, index: np.ndarray | None = None) -> np.ndarray:
    """Per cell one row [count, Σs1, Σs2, 1.0 if every row is v, else 0.0] (`stats`:
    `moment_kernel.cell_stats`): a move reads one cache line per cell it moves, where the five
    rows of `stats` cost five misses a cell (on wide500, 15 of a move's 18 µs). With `index`
    (`jit.cell_index`) holding a grid of at most `_GRID_SHARE` × cells points, the same rows
    follow in grid order (attribute 0 fastest; zeros where no cell is), so that a context
    summed off the grid (`_grid_alone`) reads them in order: the cells themselves come in the
    summary's order, and a sum over them in grid order missed the cache at every cell."""
    cells = stats.shape[1]
    points = _grid_points(index) if index is not None else 0
    rows = cells + points if 0 < points <= _GRID_SHARE * cells else cells
    out = np.zeros((rows, 4), dtype=np.float64)
    out[:cells, 0], out[:cells, 1], out[:cells, 2] = stats[0], stats[1], stats[2]
    out[:cells, 3] = (stats[3] == v) & (stats[4] == v)
    if rows > cells:
        at = _grid_cells(index)
        present = np.flatnonzero(at >= 0)
        out[cells + present] = out[at[present]]
    return out


def _grid_cells(index: np.ndarray) -> np.ndarray:
    """`jit.cell_index`'s grid: the cell at each grid point, −1 where there is none."""
    m, t = int(index[0]), int(index[1])
    g0 = 2 + m + 1 + t + 1 + int(index[2 + m + 1 + t])
    return index[g0 + 1: g0 + 1 + int(index[g0])]


def _grid_points(index: np.ndarray) -> int:
    return int(_grid_cells(index).size) if index[0] > 0 else 0


def new_state(cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(state_i, state_f) of a check with no context yet (the first check sums afresh)."""
    # After the flags, room for a move's cell list (`_walk`): allocating its 4·cells bytes per
    # check cost more than the check itself on a jump (85,680 cells: ~50 of ~80 µs).
    state_i = np.zeros(I_HEAD + cells + cells // 2 + 1, dtype=np.int64)
    state_i[I_FRESH] = 1
    return state_i, np.zeros(2 * F_SIZE, dtype=np.float64)


@compiled
def _dd_add(f, at, b):
    """f[at], f[at + 1] (a double-double) += b, with the error of the addition kept (TwoSum)."""
    hi = f[at]
    s = hi + b
    bb = s - hi
    err = (hi - (s - bb)) + (b - bb)
    lo = f[at + 1] + err
    h2 = s + lo
    f[at + 1] = lo - (h2 - s)
    f[at] = h2


@compiled
def _enter(c, sign, ws, state_i, state_f):
    count = ws[c, 0]
    s1 = ws[c, 1]
    s2 = ws[c, 2]
    state_i[I_N] += sign * np.int64(count)
    if ws[c, 3] != 0.0:
        state_i[I_EQ] += sign * np.int64(count)
    state_i[I_K] += sign
    state_i[I_OPS] += 1
    _dd_add(state_f, F_T1, sign * s1)
    _dd_add(state_f, F_T2, sign * s2)
    _dd_add(state_f, F_A1, sign * abs(s1))
    _dd_add(state_f, F_A2, sign * abs(s2))
    state_f[F_W1] += abs(s1)
    state_f[F_W2] += abs(s2)


@compiled
def _fresh(x, words, flat, index, ws, state_i, state_f):
    cells = flat.shape[0]
    for c in range(cells):
        state_i[I_HEAD + c] = 0
    state_i[I_N] = 0
    state_i[I_EQ] = 0
    state_i[I_K] = 0
    state_i[I_OPS] = 0
    for j in range(F_SIZE):
        state_f[j] = 0.0
    scratch = np.empty(cells, dtype=np.int64)
    k = member_cells_indexed(x, words, flat, index, scratch)
    for j in range(k):
        c = scratch[j]
        state_i[I_HEAD + c] = 1
        _enter(c, 1, ws, state_i, state_f)
    state_i[I_FRESH] = 0


@compiled
def _apply(out, leaving, total, ws, state_i, state_f):
    """Enter or leave the listed cells (`cell_moves.moved_cells`) as one batch: their terms
    summed in plain doubles (error ≤ γ_k of their absolute sum, kept in E), then one
    double-double addition per sum. False when the state should be summed afresh."""
    d1 = d2 = da1 = da2 = b1 = b2 = 0.0
    moved = 0
    for j in range(total):
        c = out[j]
        if j < leaving:
            if not state_i[I_HEAD + c]:
                continue
            state_i[I_HEAD + c] = 0
            sign = -1
        elif state_i[I_HEAD + c]:
            continue
        else:
            state_i[I_HEAD + c] = 1
            sign = 1
        count = np.int64(ws[c, 0])
        s1 = ws[c, 1]
        s2 = ws[c, 2]
        state_i[I_N] += sign * count
        if ws[c, 3] != 0.0:
            state_i[I_EQ] += sign * count
        state_i[I_K] += sign
        d1 += sign * s1
        d2 += sign * s2
        da1 += sign * abs(s1)
        da2 += sign * abs(s2)
        b1 += abs(s1)
        b2 += abs(s2)
        moved += 1
    if moved:
        gamma = moved * _U / (1.0 - moved * _U) * (1.0 + _REL)  # ≥ γ_k: the sums' and b's own error
        _dd_add(state_f, F_T1, d1)
        _dd_add(state_f, F_T2, d2)
        _dd_add(state_f, F_A1, da1)
        _dd_add(state_f, F_A2, da2)
        state_f[F_E1] += gamma * b1 * (1.0 + 2.0 * gamma)
        state_f[F_E2] += gamma * b2 * (1.0 + 2.0 * gamma)
        state_f[F_W1] += b1
        state_f[F_W2] += b2
        state_i[I_OPS] += 1
    a = state_f[F_A1] + state_f[F_A2]
    fresh_enough = state_f[F_E1] + state_f[F_E2] <= _STALE * a
    return state_i[I_OPS] <= _MAX_OPS and state_f[F_W1] + state_f[F_W2] <= _RESET * a and fresh_enough


@compiled
def _alone(out, k, ws, state_i, state_f):
    """The state of the k cells out[:k] (a context's members) summed as one batch, as `_apply`
    enters them into an empty state, without the member flags: the state is marked fresh, so
    the next check does not walk from it (it sums afresh, or alone again)."""
    d1 = d2 = b1 = b2 = 0.0
    n = eq = np.int64(0)
    for j in range(k):
        c = out[j]
        count = np.int64(ws[c, 0])
        s1 = ws[c, 1]
        s2 = ws[c, 2]
        n += count
        if ws[c, 3] != 0.0:
            eq += count
        d1 += s1
        d2 += s2
        b1 += abs(s1)
        b2 += abs(s2)
    _set_alone(state_i, state_f, n, eq, k, d1, d2, b1, b2)


@compiled
def _grid_alone(x, words, index, ws, cells, state_i, state_f):
    """`_alone` over the context's grid points, reading `walk_stats`' rows in grid order
    (ws[cells + point]; a point without a cell has count 0 and adds nothing): the same
    counts, and sums of the same terms in another order, within the same bound (γ_k of their
    absolute sum, k the cells summed)."""
    m = index[0]
    sel, first, some = grid_selection(x, words, index)
    if not some:  # an attribute without a value: an empty context
        _set_alone(state_i, state_f, np.int64(0), np.int64(0), 0, 0.0, 0.0, 0.0, 0.0)
        return
    digit = np.zeros(m, dtype=np.int64)
    d1 = d2 = b1 = b2 = fn = feq = 0.0
    k = 0
    lo0, hi0 = first[0], first[1]
    while True:
        base = cells
        for j in range(1, m):
            base += sel[first[j] + digit[j]]
        for p in range(lo0, hi0):
            g = base + sel[p]
            count = ws[g, 0]
            if count > 0.0:
                s1 = ws[g, 1]
                s2 = ws[g, 2]
                fn += count
                feq += count * ws[g, 3]
                d1 += s1
                d2 += s2
                b1 += abs(s1)
                b2 += abs(s2)
                k += 1
        if not next_digit(digit, first, 1, m):
            break
    _set_alone(state_i, state_f, np.int64(fn), np.int64(feq), k, d1, d2, b1, b2)


@compiled
def _set_alone(state_i, state_f, n, eq, k, d1, d2, b1, b2):
    """The state of k cells summed as one batch in plain doubles (`_alone`), marked fresh."""
    state_i[I_FRESH] = 1
    state_i[I_N] = n
    state_i[I_EQ] = eq
    state_i[I_K] = k
    state_i[I_OPS] = 0
    for j in range(F_SIZE):
        state_f[j] = 0.0
    if k:
        gamma = k * _U / (1.0 - k * _U) * (1.0 + _REL)  # ≥ γ_k: the sums' and b's own error
        state_f[F_T1] = d1
        state_f[F_T2] = d2
        state_f[F_A1] = b1
        state_f[F_A2] = b2
        state_f[F_E1] = gamma * b1 * (1.0 + 2.0 * gamma)
        state_f[F_E2] = gamma * b2 * (1.0 + 2.0 * gamma)
        state_f[F_W1] = b1
        state_f[F_W2] = b2


@compiled
def _complement(x, words, t):
    """The bits of the full context (every one of the t values) that (x, words) lacks."""
    if words.size == 0:
        return ((np.int64(1) << t) - 1) ^ x, words
    out = np.empty_like(words)
    for w in range(words.size):
        ones = ~np.uint64(0)
        if (w + 1) << 6 > t:
            ones = (np.uint64(1) << np.uint64(t - (w << 6))) - np.uint64(1)
        out[w] = ones ^ words[w]
    return x, out


@compiled
def _walk(x, words, dx, dwords, flat, index, ws, state_i, state_f):
    """Bring the state to the context (x, words), from the last one, which differs from it in
    the bits (dx, dwords) (`cell_moves.moved_cells`). A move touching more than half the
    cells is a jump: it starts from the full context's state, saved once summed (a descent
    starts there: restoring it costs a flag per cell instead of a sum per cell), when the
    context lacks few enough of its cells; else it sums afresh."""
    cells, width = flat.shape
    if index[0] > 0:
        out = state_i[I_HEAD + cells:]
        if state_i[I_FRESH] == 0:
            leaving, total = moved_cells(x, words, dx, dwords, flat, index, out)
            if leaving >= 0 and _apply(out, leaving, total, ws, state_i, state_f):
                return
        # A jump to a context of few grid points (a uniform draw, a descent's first steps from
        # V's cell): its members off the grid and one batch sum, O(grid points), not O(cells).
        size = grid_size(x, words, index)
        if 0 <= size and size * _ALONE_SHARE <= cells:
            if ws.shape[0] > cells:  # the rows in grid order too (`walk_stats`)
                _grid_alone(x, words, index, ws, cells, state_i, state_f)
            else:
                _alone(out, grid_members(x, words, index, out), ws, state_i, state_f)
            return
        if state_i[I_SAVED]:
            cx, cwords = _complement(x, words, index[1])
            leaving, total = moved_cells(x, words, cx, cwords, flat, index, out)
            if leaving >= 0:
                for c in range(cells):  # every cell is in the full context
                    state_i[I_HEAD + c] = 1
                for j in range(4):
                    state_i[I_N + j] = state_i[I_FULL + j]
                for j in range(F_SIZE):
                    state_f[j] = state_f[F_FULL + j]
                state_i[I_FRESH] = 0
                if _apply(out, leaving, total, ws, state_i, state_f):
                    return
    _fresh(x, words, flat, index, ws, state_i, state_f)
    if index[0] > 0 and not state_i[I_SAVED] and state_i[I_K] == cells:  # the full context: save it
        for j in range(4):
            state_i[I_FULL + j] = state_i[I_N + j]
        for j in range(F_SIZE):
            state_f[F_FULL + j] = state_f[j]
        state_i[I_SAVED] = 1
