"""The compiled LOF check (`core.verifiers.lof_kernel`) on a summary's sorted runs: the per-record
arrays are built once per (runs, v), then each context costs one kernel call, membership
included (`lof_kernel.lof_context`: the context's bitset in, `jit.member_cells` inside).

Per record: where v sits in every cell's run (two binary searches per cell) and the merged
neighbourhood — every cell's values in [a, b] ∋ v, ascending, with their cells, about _NEAR rows
of the table per side (a and b read off the runs' sample, so any misestimate only changes how
much of the walk the neighbourhood serves, never the answer). They travel to the kernel packed
in two arrays (`lof_kernel.pack_record`), with each cell's context bits: numba's dispatch costs
about 0.15 µs per array argument. Memory: about 200 bytes per cell and 28 per neighbourhood
entry (the record's arrays and their packed copy), whatever N.

On a wide summary (`jit.WALK_CELLS` cells or more) the checks walk (`lof_window_walk`): the
record's window is wider — at least 4·(2k + 4) distinct values a side besides the _NEAR rows,
widened when a context of many cells reads past it (`lof_window`, `_WindowWalk`) — its distinct
values numbered and each cell's rows in it grouped by value (`window_of`, `window_counts`). A
batch that is one BFS node's neighbours is checked from the node where that costs less
(`node_counts`: one pass over the cells, each neighbour's counts the node's ± its slab's) — on
the births shape about 4 ms a node of 86 neighbours against ~20 ms walking them (load 6-7).

Used by `Evaluator._verify` for `Lof` on the summary path with sorted runs (DuckDB). The Spark
path (per-cell windows, `engine/window.py`) and the plain path keep the numpy `local_outlier_factor`,
which remains the reference the tests compare this kernel against.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from pcor_sql.core.jit import NO_INDEX, NO_WORDS, WALK_CELLS, cell_index, context_words, flat_bits
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.lof import DISTINCT, Lof
from pcor_sql.core.verifiers.lof_kernel import (
    DISTINCT_RULE, FAR, PLAIN_RULE, TOO_WIDE, lof_context, lof_score, pack_record, repack_positions,
)
from pcor_sql.core.verifiers.lof_walk import record_keys, record_positions
from pcor_sql.core.verifiers.lof_window_walk import WIDER, lof_window_walk
from pcor_sql.core.verifiers.node_counts import WALK, NodeSlabs, fits, lof_from_slabs, lof_node_many
from pcor_sql.core.verifiers.value_order import by_value, grid_meta, lof_direct, share_gate
from pcor_sql.core.verifiers.walk_batches import lof_many, words_of
from pcor_sql.core.verifiers.window_counts import cell_rows, window_entries
from pcor_sql.engine.cellruns import CellRuns, gather_segments
from pcor_sql.engine.grid_layout import grid_layout
from pcor_sql.engine.summary import CellSummary
from pcor_sql.engine.walk_states import WalkStates
from pcor_sql.errors import InternalError

_NEAR = 4096  # rows of the whole table per side of v in the merged neighbourhood
# The neighbourhood serves a context holding at least this share of the rows; a smaller one
# walks its own runs through a heap over its cells. Measured (10M rows, 1,200 cells, k = 20, CPU
# µs per kernel call at load 8, neighbourhood / heap): share 0.004: 24.8 / 8.9; 0.029: 13.3 /
# 11.9; 0.081: 10.4 / 13.2; 0.18: 7.9 / 17.0; 0.58: 6.9 / 27.2 — they cross near 0.05.
_NEAR_SHARE = 1.0 / 20


class LofRecord:
    """The kernel's inputs for one record value v over `runs` (see `lof_kernel.lof_score`)."""

    __slots__ = ("values", "starts", "v", "pos", "keys", "near_v", "near_c", "near_below", "near_upto")

    def __init__(self, runs: CellRuns, v: float, near: tuple[float, float] | None = None, merged: bool = True):
        """`near`: the range [a, b] of positions rows 2, 3 (default `_near_range`); `merged`: whether
        its rows are merged (`near_v`, `near_c`) — a window walk counts them per cell instead
        (`window_of`), and its heap never reads the merged rows."""
        # Contiguous float64 / int64 (no copy for the runs as built): one compiled specialization.
        values = np.ascontiguousarray(runs.values, dtype=np.float64)
        starts = np.ascontiguousarray(runs.starts, dtype=np.int64)
        self.values, self.starts, self.v = values, starts, float(v)
        a, b = _near_range(runs.sample(), values.size, self.v) if near is None else near
        self.pos = record_positions(values, starts, self.v, a, b)
        self.keys = record_keys(values, starts, self.pos)
        first, past = self.pos[2], self.pos[3]
        if not merged:
            first = past  # no merged rows: the walk of `lof_kernel` is never given them
        near = gather_segments(values, first, past)
        cells = np.repeat(np.arange(first.size, dtype=np.int32), past - first)
        order = np.argsort(near, kind="stable")
        self.near_v, self.near_c = near[order], cells[order]
        self.near_below = int(self.near_v.searchsorted(self.v, side="left"))
        self.near_upto = int(self.near_v.searchsorted(self.v, side="right"))

    def score(self, member: np.ndarray, k: int, duplicates: str) -> tuple[float, int, int]:
        """(LOF(V), N, status) of the context whose cells are `member` (see `lof_score`)."""
        score, n, status = lof_score(self.values, self.starts, member, self.pos, self.keys, self.near_v, self.near_c,
                                     self.v, self.near_below, self.near_upto, _NEAR_SHARE, k, _rule(duplicates))
        return float(score), int(n), int(status)

    def packed(self, k: int, duplicates: str, flat: np.ndarray, index: np.ndarray = NO_INDEX
               ) -> tuple[np.ndarray, np.ndarray]:
        """(ints, floats) for `lof_context` with the context bits `flat` (`jit.flat_bits`) and
        the cells by value `index` (`jit.cell_index`; NO_INDEX: every check scans every cell)."""
        return pack_record(self.starts, self.pos, self.keys, self.near_v, self.near_c, self.v, self.near_below,
                           self.near_upto, _NEAR_SHARE, k, _rule(duplicates), flat, index)


def _rule(duplicates: str) -> int:
    return DISTINCT_RULE if duplicates == DISTINCT else PLAIN_RULE


def _near_range(sample: np.ndarray, rows: int, v: float, per_side: int = _NEAR) -> tuple[float, float]:
    """[a, b] ∋ v holding about `per_side` rows of the table per side: the sample holds every
    q-th value of each run (CellRuns.sample), so _NEAR rows are about _NEAR / q sample places."""
    if sample.size == 0:
        return v, v
    steps = max(1, -(-per_side * sample.size // max(rows, 1)))
    below = int(sample.searchsorted(v, side="left"))
    above = int(sample.searchsorted(v, side="right"))
    a = float(sample[below - steps]) if below >= steps else -math.inf
    b = float(sample[above + steps - 1]) if above + steps <= sample.size else math.inf
    return min(a, v), max(b, v)


def window_range(sample: np.ndarray, rows: int, v: float, distinct: int, per_side: int = _NEAR
                 ) -> tuple[float, float]:
    """[a, b] ∋ v holding about `per_side` rows of the table per side and at least `distinct` distinct
    values per side (or reaching the table's end): the values a wide walk counts
    (`window_counts`). Read off the sample, whose distinct values are some of the table's, so
    `distinct` sample values between v and a are at least that many of the table's; any window
    is correct, its size only sets how often a check reads past it."""
    a, b = _near_range(sample, rows, v, per_side)
    if sample.size == 0:
        return a, b
    u = np.unique(sample)
    below = int(u.searchsorted(v, side="left"))
    above = int(u.searchsorted(v, side="right"))
    a_d = float(u[below - distinct]) if below >= distinct else -math.inf
    b_d = float(u[above + distinct - 1]) if above + distinct <= u.size else math.inf
    return min(a, a_d, v), max(b, b_d, v)


#: Each widening (`lof_window`) multiplies the window's distinct values and rows a side by this.
WIDEN = 4


def lof_window(sample: np.ndarray, rows: int, v: float, k: int, widened: int = 0) -> tuple[float, float]:
    """The window a LOF walk counts: at least 4·(2k + 4) distinct values a side (over twice
    the walk's first read, `lof_window_walk.FIRST_FILL`; a tied metric's 4,096 rows hold ~20
    distinct values) besides the _NEAR rows (`window_range`), each times WIDEN^widened — the
    walk widens it when a context of many cells reads past it (`lof_window_walk.WIDER`: the
    births shape's record, v = 2 in a state averaging ~900, in a context of large states only).
    Narrow, because a move pays its slab's entries in the window: the whole table's (~4.3 a cell
    on the births shape) doubled a check after a move of the full context (`python -m
    benchmarks.per_check_cells`). Any window is correct: its size only sets how often a check
    reads past it."""
    grow = WIDEN ** widened
    return window_range(sample, rows, v, 4 * (2 * k + 4) * grow, _NEAR * grow)


def window_of(values: np.ndarray, starts: np.ndarray, pos: np.ndarray, v: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool, bool]:
    """(wu, estart, ent, v's index, left end, right end) of the window whose rows are every cell's
    pos[2] .. pos[3]: its distinct values, the cells' entries (`window_counts.window_entries`), and
    whether it holds every value below / above v. O(rows in the window + entries · log): the rows
    are grouped cell by cell, never merged (a tied metric's window may hold most of the table)."""
    estart, ent, wu = window_entries(values, starts, pos[2], pos[3])
    dv = int(wu.searchsorted(v))  # v's index (LOF's walk: v is there, `_walks`)
    return wu, estart, ent, dv, bool((pos[2] == starts[:-1]).all()), bool((pos[3] == starts[1:]).all())


def lof_check(summary: CellSummary, space: ContextSpace, verifier: Lof, v: float) -> Callable[[int], tuple[bool, int]]:
    """context (bitset over `space`) → (verdict, N) through the kernel, membership included,
    for a `Lof` on a summary with sorted runs (`compiled_checks` registers it for exactly `Lof`)."""
    runs = summary.runs()
    if _walks(summary, space, runs, v):
        return _WindowWalk(summary, space, verifier, v)
    record = LofRecord(runs, v)
    # The record's own value of attribute 0 is in every context checked (admissible contexts).
    flat = flat_bits(summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
    # A narrow summary scans its few cells (~1.5 ns each) faster than it would count values.
    wide = summary.count.size >= WALK_CELLS
    index = cell_index(summary.coords, space.offsets, space.t) if wide else NO_INDEX
    ints, floats = record.packed(verifier.k, verifier.duplicates, flat, index)
    values, n_words = record.values, (space.t + 63) // 64
    narrow = 1 << 63 if n_words == 1 else 0  # as `context_words` (x only in a space of ≤ 64 bits)

    def check(mask: int) -> tuple[bool, int]:
        if mask < narrow:  # `context_words` inlined: a check is a few µs
            return _decided(summary, space, verifier, v, mask, *lof_context(mask, NO_WORDS, values, ints, floats))
        return _decided(summary, space, verifier, v, mask,
                        *lof_context(0, context_words(mask, n_words)[1], values, ints, floats))

    return check


def _decided(summary: CellSummary, space: ContextSpace, verifier: Lof, v: float, mask: int, score: float, n: int,
             status: int) -> tuple[bool, int]:
    if n == 0:
        raise InternalError("an admissible context has an empty population")
    if status == TOO_WIDE:
        # The numpy path raises lof's UserError (the values span too wide for its distances).
        return bool(verifier.check(summary.population(summary.member(space, mask), v))), n
    return score > verifier.threshold, n  # NaN (N < 2, one distinct value): never an outlier


class _WindowWalk:
    """The checks of a wide summary (`lof_window_walk`), cells in grid order (`engine.grid_layout`:
    a move's slab is read in order), over the window `lof_window(..., widened)`; a check that
    answers WIDER widens it — the record's arrays and the walks' states rebuilt, O(rows in the
    window + cells), WIDEN times the values each time, so a few times at most — and is asked again."""

    def __init__(self, summary: CellSummary, space: ContextSpace, verifier: Lof, v: float):
        self.summary, self.space, self.verifier, self.v = summary, space, verifier, float(v)
        layout = grid_layout(summary)
        self.runs, self.n_words = layout.runs, (space.t + 63) // 64
        # The record's own value of attribute 0 is in every context checked (admissible contexts).
        self.flat = flat_bits(layout.coords, space.offsets, space.offsets[0] + space.anchor[0])
        self.index = cell_index(layout.coords, space.offsets, space.t)
        self.bit_attr = [i for i, attr in enumerate(space.attributes) for _ in attr.domain]
        # A large context's single check goes direct (`value_order`): no slab of cells walked.
        sizes = tuple(len(attr.domain) for attr in space.attributes)
        self.grid = grid_meta(layout.coords, np.diff(layout.runs.starts), tuple(space.offsets), sizes)
        self.large = share_gate(tuple(space.offsets), sizes)
        self.widened = -1
        self._widen()

    def _widen(self) -> None:
        self.widened += 1
        runs, verifier = self.runs, self.verifier
        near = lof_window(runs.sample(), runs.values.size, self.v, verifier.k, self.widened)
        record = LofRecord(runs, self.v, near, merged=False)
        self.values = record.values
        if self.widened == 0:
            self.ints, self.floats = record.packed(verifier.k, verifier.duplicates, self.flat, self.index)
        else:  # only the window's edges moved: a repack of the bits and index cost ~0.14 s on flights
            repack_positions(self.ints, self.floats, record.pos, record.keys)
        self.wu, estart, self.ent, dv, left_end, right_end = window_of(record.values, record.starts, record.pos,
                                                                       record.v)
        self.ends = (dv, left_end, right_end)
        self.rows_of = cell_rows(record.starts, estart)
        self.estart, self._by_value = estart, None  # built when a direct check first needs it
        self.slabs: NodeSlabs | None = None  # the last node's slabs (`_from_node`), over this window
        self.walk = WalkStates(self.summary.count.size, self.wu.size, dv, left_end, right_end, False, self.n_words,
                               self.space.full, (self.flat, self.index, self.rows_of, self.ent))

    @property
    def by_value(self) -> tuple[np.ndarray, ...]:
        """The window's entries by value (`value_order.by_value`), O(entries · log) once a
        window: a release whose contexts are all small never needs them (flights: 0.24 s)."""
        if self._by_value is None:
            self._by_value = by_value(self.estart, self.ent, self.flat, self.wu.size, self.space.m, self.space.t)
        return self._by_value

    def _args(self) -> tuple[Any, ...]:
        return self.values, self.ints, self.floats, self.rows_of, self.ent, self.wu

    def __call__(self, mask: int) -> tuple[bool, int]:
        if self.grid is not None and mask not in self.walk.last and self.large(mask):
            x, words = context_words(mask, self.n_words)
            score, n, status = lof_direct(x, words, self.space.t, *self.grid, self.by_value, self.wu, *self.ends,
                                          self.v, self.verifier.k, _rule(self.verifier.duplicates))
            if status != WALK:
                return _decided(self.summary, self.space, self.verifier, self.v, mask, score, n, status)
        while True:
            x, words, dx, dwords, state, member, cnt, bits = self.walk.step(mask)
            score, n, status = lof_window_walk(x, words, dx, dwords, *self._args(), state, member, cnt, bits,
                                               self.walk.scratch)
            if status != WIDER:
                return _decided(self.summary, self.space, self.verifier, self.v, mask, score, n, status)
            self._widen()

    def many(self, masks: list[int], rows: Any = None) -> list[tuple[bool, int]]:
        """The checks of `masks` (their words `rows`, when given) in one compiled call: a node's
        neighbours from the node (`node_counts`) where one pass over the cells costs less than
        walking from one neighbour to the next, else along the walk (`walk_batches.lof_many`);
        those that answer WIDER (or WALK) again one by one, through the walk."""
        node = node_of(masks, rows)
        if node is not None and self._node_pays(*node):
            return self._from_node(masks, *node)
        ctx, prev, (state, member, cnt, bits), codes, ns = self.walk.batch(masks, rows)
        scores = np.empty(len(masks))
        lof_many(ctx, prev, *self._args(), state, member, cnt, bits, self.walk.scratch, scores, codes, ns)
        wider = codes == WIDER
        if wider.any():
            self._widen()
        return self._answers(masks, scores, ns, codes, wider)

    def _answers(self, masks: list[int], scores: np.ndarray, ns: np.ndarray, codes: np.ndarray, again: np.ndarray
                 ) -> list[tuple[bool, int]]:
        """A batch's (verdict, N) from its kernel's outputs, those flagged `again` asked once more one
        by one; `_decided`'s answers, compared as one array where no check is special (a batch of
        5,000 neighbours paid ~1 µs a check in Python)."""
        if not again.any() and ns.all() and not (codes == TOO_WIDE).any():
            return list(zip((scores > self.verifier.threshold).tolist(), ns.tolist()))
        return [self(mask) if ask else _decided(self.summary, self.space, self.verifier, self.v, mask, score, n,
                                                 status)
                for mask, score, n, status, ask in zip(masks, scores.tolist(), ns.tolist(), codes.tolist(),
                                                       again.tolist())]

    def _node_pays(self, parent: int, flips: list[int]) -> bool:
        return node_pays(self.space, self.bit_attr, self.summary.count.size, self.wu.size, parent, flips)

    def _from_node(self, masks: list[int], parent: int, flips: list[int]) -> list[tuple[bool, int]]:
        scores, codes, ns = np.empty(len(masks)), np.empty(len(masks), dtype=np.int64), np.empty(len(masks), dtype=np.int64)
        dv, left_end, right_end = self.ends
        words, bits, k, rule = words_of(parent, self.n_words), np.asarray(flips, dtype=np.int64), self.verifier.k, \
            _rule(self.verifier.duplicates)
        if fits(self.space.t, self.wu.size, _MAX_WINDOW):  # carried from the last node (`NodeSlabs`)
            if self.slabs is None:
                self.slabs = NodeSlabs(self.flat, self.space.m, self.space.t, self.index, self.rows_of, self.ent,
                                       self.wu.size)
            at = self.slabs.at(parent, words)
            lof_from_slabs(words, bits, at.n_p, at.cnt_p, at.slab_n, at.slab_cnt, self.wu, dv, left_end, right_end,
                           self.v, k, rule, scores, codes, ns)
        else:
            lof_node_many(words, bits, self.flat, self.space.m, self.space.t, self.rows_of, self.ent, self.wu, dv,
                          left_end, right_end, self.v, k, rule, scores, codes, ns)
        return self._answers(masks, scores, ns, codes, codes == WALK)


#: The node's pass per cell and per window value a neighbour (`node_counts`), in grid points of
#: a walk's move (`cell_moves`: a lookup, a member flag, the cell's row): a move ~33 ns a grid
#: point and the pass ~15 ns a cell on the births shape; a window value ~1 ns while the slabs'
#: counts stay in cache (births: 86 × 204) but ~20 ns past it (flights' continuous metric,
#: 136 × 69,535: 130-310 ms a node against ~15 ms walking) — weighed at the dearer. CPU, load 6-9.
_CELL_COST = 0.5
_WINDOW_COST = 1.0
_MAX_WINDOW = 1 << 22  # slabs × window values: at most 32 MiB of counts


def node_pays(space: ContextSpace, bit_attr: list[int], cells: int, window_values: int, parent: int, flips: list[int]
              ) -> bool:
    """Whether one pass over the `cells` (m bit tests a cell) and each neighbour's copy of the
    window counts cost less than the walk's moves from one neighbour to the next (each undoes
    one slab and takes another: ~2 slabs of grid points a neighbour). bit_attr: each bit's
    attribute."""
    sizes = [space.attribute_bits(parent, i).bit_count() for i in range(space.m)]
    grid = math.prod(sizes)
    # Σ over the flips of their attribute's slab, as flips per attribute × slab (5,000 flips a node).
    per_attr = np.bincount(np.asarray(bit_attr, dtype=np.int64)[np.asarray(flips, dtype=np.int64)],
                           minlength=space.m).tolist()
    slabs = sum(count * (grid // max(size, 1)) for count, size in zip(per_attr, sizes))
    window = len(flips) * window_values  # the neighbours' slabs of window counts, held at once
    node = _CELL_COST * cells + _WINDOW_COST * window
    return window <= _MAX_WINDOW and node < 2 * slabs


def node_of(masks: list[int], rows: Any = None) -> tuple[int, list[int]] | None:
    """(P, the bit each of `masks` toggles in P) when every one of two or more distinct `masks`
    is P with one bit toggled (a BFS node's neighbours), else None. (Two masks are the
    neighbours of two nodes, either will do; three or more of one node only.) `rows`, when
    given, are the masks' words (`core.neighbour_rows`), read as one array."""
    if len(masks) < 2:
        return None
    diff = masks[0] ^ masks[1]
    if diff.bit_count() != 2:
        return None
    low = diff & -diff
    for parent in (masks[0] ^ low, masks[0] ^ (diff ^ low)):
        flips = _toggled(masks, parent) if rows is None else _toggled_rows(rows, parent)
        if flips is not None and len(set(flips)) == len(flips):
            return parent, flips
    return None


def _toggled(masks: list[int], parent: int) -> list[int] | None:
    """The bit each mask toggles in `parent`, or None unless each toggles exactly one."""
    toggled = [mask ^ parent for mask in masks]
    if all(d and not d & (d - 1) for d in toggled):
        return [d.bit_length() - 1 for d in toggled]
    return None


def _toggled_rows(rows: np.ndarray, parent: int) -> list[int] | None:
    """`_toggled` of the masks whose words are `rows`: a 5,000-bit XOR a mask in Python ints was
    ~2 µs a neighbour."""
    d = rows ^ words_of(parent, rows.shape[1])
    if not (np.bitwise_count(d).sum(axis=1, dtype=np.int64) == 1).all():
        return None
    word = d.argmax(axis=1)  # the one non-zero word of each row
    one = d[np.arange(d.shape[0]), word]
    _, exponent = np.frexp(one.astype(np.float64))  # a power of two 2^b (exact in float64): b + 1
    return (64 * word + exponent - 1).tolist()


def _walks(summary: CellSummary, space: ContextSpace, runs: CellRuns, v: float) -> bool:
    """Whether checks carry the last context along (`lof_window_walk`): a wide summary, whose
    values span less than FAR / 4 (no context is too wide) and whose record's own cell holds
    v (a context is constant exactly when all its rows are constant at v; the window holds v)."""
    if summary.count.size < WALK_CELLS or not float(summary.vmax.max()) - float(summary.vmin.min()) < FAR / 4:
        return False
    own = np.flatnonzero((summary.coords == np.asarray(space.anchor)).all(axis=1))
    if own.size != 1:
        return False
    run = runs.cell_values(int(own[0]))
    at = int(run.searchsorted(v))
    return at < run.size and float(run[at]) == v
