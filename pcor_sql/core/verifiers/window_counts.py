"""A context's rows per distinct value over a window of values around v, carried along the moves.

LOF and the histogram read a context only near the record's value v: LOF its k-distance
neighbourhood, the histogram V's bin. On a wide summary (`jit.WALK_CELLS` cells or more) a check
that finds those values cell by cell pays O(member cells) — 22 ms on an 85,680-cell context of a
tied integer metric. Here, per record, a window [a, b] ∋ v of the metric is fixed once (every
cell's rows with a ≤ x ≤ b; `engine.lof_checks.window_range` chooses it); its distinct values
`wu` are numbered, and each cell's rows in it are grouped by value: per cell a few (value index,
copies) entries (`window_entries`). A walk keeps the member flags, N and the context's count of
rows per window value (`cnt`): a move enters or leaves a slab of cells
(`cell_moves.moved_cells`), and each cell adds or subtracts its entries — so a move costs its
cells plus their rows in the window, and a check reads `cnt` outwards from v: O(window values
it reads), whatever the number of member cells. Counts, never lists: a value held by 1,000 rows
of a context is one integer.

Exact: `cnt[d]` is, by induction over the moves (a cell enters when its flag goes up and leaves
when it goes down, each once), Σ over member cells of the cell's rows equal to wu[d]; so the
context's distinct values in [a, b] in order of distance from v, with their counts, are exactly
the non-zero `cnt` read outwards from v's index. Past the window the reader falls back to the
member cells' runs (LOF's heap, the histogram's per-cell count), which read the same rows.

The walk also keeps, for the histogram, the context's min and max without visiting its cells:
the cells ranked by their minimum (and by their maximum) and a bitset over those ranks of the
member cells; the context's min is the minimum of the cell at the lowest set rank (cells/64
words at most, usually the first), the max likewise from the top.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import moved_cells
from pcor_sql.core.jit import compiled_with, first_position, member_cells_indexed
from pcor_sql.errors import InternalError

# Per cell (`cell_rows`, int32, one row more than cells: a cell's entries end where the next
# cell's begin): rows, first entry, and for the histogram its rank by minimum and by maximum —
# 8 or 16 bytes a moved cell, so that a slab's rows stay in cache (a 64-byte row per cell cost a
# cache miss per moved cell: 460 µs a move on the births shape at load 10).
R_ROWS, R_E0, R_RMIN, R_RMAX = range(4)
# state: fresh, N, member cells with rows, v's index in the window, whether the window holds
# every value below a (1) / above b
S_FRESH, S_N, S_CELLS, S_DV, S_LEND, S_REND, S_SIZE = range(7)


@compiled_with(nogil=True)
def _grouped(values, starts, first, past):
    """(estart (cells + 1), each entry's value, its copies): cell c's rows values[first[c]:past[c]]
    (ascending) grouped by value, entries estart[c] .. estart[c + 1]."""
    cells = starts.size - 1
    estart = np.empty(cells + 1, dtype=np.int64)
    total = 0
    for c in range(cells):
        estart[c] = total
        for p in range(first[c], past[c]):
            if p == first[c] or values[p] != values[p - 1]:
                total += 1
    estart[cells] = total
    ev = np.empty(total)
    em = np.empty(total, dtype=np.int32)
    e = 0
    for c in range(cells):
        p = first[c]
        while p < past[c]:
            x = values[p]
            q = first_position(values, p, past[c], x, True)
            ev[e] = x
            em[e] = q - p
            e += 1
            p = q
    return estart, ev, em


def window_entries(values: np.ndarray, starts: np.ndarray, first: np.ndarray, past: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estart (cells + 1), ent (int32, 2 · entries), wu): the window's rows — cell c's
    values[first[c]:past[c]] — grouped by value, as pairs (index in `wu`, copies) in
    ent[2·estart[c] : 2·estart[c + 1]]; `wu` the window's distinct values, ascending."""
    estart, ev, em = _grouped(values, starts, first, past)
    if estart[-1] >= 1 << 31:
        raise InternalError("a window walk counts in 32 bits: fewer than 2^31 entries")
    wu = np.unique(ev)
    ent = np.empty(2 * ev.size, dtype=np.int32)
    ent[0::2] = wu.searchsorted(ev)
    ent[1::2] = em
    return estart, ent, wu


def cell_rows(starts: np.ndarray, estart: np.ndarray, vmin: np.ndarray | None = None,
              vmax: np.ndarray | None = None) -> np.ndarray:
    """Per cell the R_* row (int32; `estart`: `window_entries`'); with `vmin`, `vmax` (the runs'
    minima and maxima) the ranks too."""
    cells = starts.size - 1
    if starts[-1] >= 1 << 31 or estart[-1] >= 1 << 31:
        raise InternalError("a window walk counts in 32 bits: fewer than 2^31 rows")
    out = np.zeros((cells + 1, 2 if vmin is None else 4), dtype=np.int32)
    out[:cells, R_ROWS] = np.diff(starts)
    out[:, R_E0] = estart
    if vmin is not None:
        out[np.argsort(vmin, kind="stable"), R_RMIN] = np.arange(cells)
        out[np.argsort(vmax, kind="stable"), R_RMAX] = np.arange(cells)
    return out


def new_walk(cells: int, window: int, dv: int, left_end: bool, right_end: bool, ranks: bool
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(state, member, cnt, bits, scratch) of a walk with no context yet; `bits` holds the two
    rank bitsets when `ranks` (the histogram's min and max: `cell_rows` with ranks), else none."""
    state = np.zeros(S_SIZE, dtype=np.int64)
    state[S_FRESH] = 1
    state[S_DV], state[S_LEND], state[S_REND] = dv, int(left_end), int(right_end)
    words = (cells + 63) // 64
    bits = np.zeros(2 * words if ranks else 0, dtype=np.uint64)
    return state, np.zeros(cells, dtype=np.bool_), np.zeros(window, dtype=np.int64), bits, \
        np.empty(2 * cells + 2, dtype=np.int64)


@compiled_with(nogil=True)
def _apply(cells_moved, k, sign, rows_of, ent, state, cnt, bits):
    """Enter (sign 1) or leave (−1) the cells cells_moved[:k]: N, the member cells with rows,
    the window counts and the rank bitsets. In passes of independent loads (no branch on the
    data inside them), so that the cache misses of a slab's cells overlap."""
    n = 0
    with_rows = 0
    for j in range(k):
        rows = rows_of[cells_moved[j], R_ROWS]
        n += rows
        with_rows += rows > 0
    state[S_N] += sign * n
    state[S_CELLS] += sign * with_rows
    # The entries of consecutive cells are consecutive: a run of cells (a slab's block in grid
    # order, `engine.grid_layout`) is one loop over its entries, not one short loop a cell, whose
    # trip count (a few rows) the branch predictor misses.
    j = 0
    while j < k:
        c = cells_moved[j]
        last = c
        j += 1
        while j < k and cells_moved[j] == last + 1:
            last += 1
            j += 1
        for e in range(rows_of[c, R_E0], rows_of[last + 1, R_E0]):
            cnt[ent[2 * e]] += sign * np.int64(ent[2 * e + 1])
    if bits.size > 0:
        half = bits.size // 2
        one = np.uint64(1)
        for j in range(k):
            c = cells_moved[j]
            if rows_of[c, R_ROWS] > 0:
                for side in range(2):
                    r = rows_of[c, R_RMIN + side]
                    bits[side * half + (r >> 6)] ^= one << np.uint64(r & 63)


@compiled_with(nogil=True)
def move(x, words, dx, dwords, flat, index, rows_of, ent, state, member, cnt, bits, scratch):
    """Bring the walk to the context (x, words) from the last one (differing in the bits dx,
    dwords: `cell_moves.moved_cells`), or afresh (the first check, or a move touching more than
    half the cells)."""
    cells = flat.shape[0]
    if state[S_FRESH] == 0 and index[0] > 0:
        out = scratch[: cells // 2 + 1]
        leaving, total = moved_cells(x, words, dx, dwords, flat, index, out)
        if leaving >= 0:
            # The cells whose flag changes, compacted in place: first those leaving, then entering.
            gone = 0
            for j in range(leaving):
                c = out[j]
                out[gone] = c
                gone += member[c]
                member[c] = False
            came = gone
            for j in range(leaving, total):
                c = out[j]
                out[came] = c
                came += not member[c]
                member[c] = True
            _apply(out, gone, -1, rows_of, ent, state, cnt, bits)
            _apply(out[gone:], came - gone, 1, rows_of, ent, state, cnt, bits)
            return
    member[:] = False
    cnt[:] = 0
    bits[:] = 0
    for j in range(S_N, S_DV):
        state[j] = 0
    inside = scratch[:cells]
    k = member_cells_indexed(x, words, flat, index, inside)
    for j in range(k):
        member[inside[j]] = True
    _apply(inside, k, 1, rows_of, ent, state, cnt, bits)
    state[S_FRESH] = 0


@compiled_with(nogil=True)
def lowest_rank(bits, side):
    """The lowest set rank of bitset `side` (0: by minimum, 1: by maximum); −1 if none."""
    half = bits.size // 2
    for w in range(half):
        word = bits[side * half + w]
        if word != 0:
            r = 0
            while not (word >> np.uint64(r)) & np.uint64(1):
                r += 1
            return (w << 6) + r
    return -1


@compiled_with(nogil=True)
def highest_rank(bits, side):
    """The highest set rank of bitset `side`; −1 if none."""
    half = bits.size // 2
    for w in range(half - 1, -1, -1):
        word = bits[side * half + w]
        if word != 0:
            r = 63
            while not (word >> np.uint64(r)) & np.uint64(1):
                r -= 1
            return (w << 6) + r
    return -1
