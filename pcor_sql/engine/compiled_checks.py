"""Compiled validity checks on the per-cell summary: context bitset → (verdict, population size).

`compiled_check` returns a function of a context (its bitset) for the verifiers whose type
has a kernel registered here (`kernel(cls)`, exact types only): the built-ins, whose kernels
live in `core.verifiers.moment_kernel` (Grubbs, z-score),
`core.verifiers.histogram_kernel` (histogram) and `core.verifiers.lof_kernel` (LOF, both rules
for duplicates, through `engine.lof_checks`), or None, and then the evaluator takes the
reference path (`SummaryPopulation` and `verifier.check`). A summary that serves values through per-cell
windows (Spark) has no sorted runs here, so it keeps the reference path too.

Each kernel does the membership (`jit.member_cells`, as `CellSummary.member`; on a summary of
`jit.WALK_CELLS` cells or more through the cells of each value, `jit.member_cells_indexed`), the
population's moments and the verdict in one call; on such a wide summary every check keeps the
last context checked and pays only for the cells of the values that changed
(`core.verifiers.moment_walk`; `core.verifiers.window_counts` for LOF and the histogram, which
also carry the context's rows per value near v, so a check reads no member cell); the kernels' docstrings show why their verdicts are the reference's. When
a kernel cannot decide exactly (a histogram bin whose edges need the reference's bisection),
the reference decides that context; Grubbs between two tabulated critical values compares the
reference kernel's G with G_crit(α, N) itself (`grubbs_critical_one`).

Measured with `python -m benchmarks per-check --rows 10000000 --contexts 3000`
(1,200 cells, CPU µs per check, at load 6.4 on 2 cores): Grubbs 4.1 (reference 28.8), z-score
3.9 (23.9), histogram 5.6 (84.7). A process pays numba's import and first call once: about
0.5-1 s with the compiled code cached, and some seconds more on the machine's first run, which
compiles it (`core.jit`).
"""

from __future__ import annotations

from typing import Any, Callable

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.moment_node_checks import NodeChecks
from pcor_sql.engine.summary import CellSummary
from pcor_sql.errors import InternalError

Check = Callable[[int], tuple[bool, int]]
Builder = Callable[[CellSummary, ContextSpace, Any, float], "Check | None"]

#: The kernels by verifier type, exact: a subclass may override `check`. Each kernel registers
#: itself below with `kernel(cls)`; its module imports numba only when it is first built.
KERNELS: dict[type, Builder] = {}


def kernel(cls: type) -> Callable[[Builder], Builder]:
    """Register the decorated builder as `cls`'s compiled check."""

    def register(build: Builder) -> Builder:
        KERNELS[cls] = build
        return build

    return register


def compiled_check(summary: CellSummary, space: ContextSpace, verifier: Verifier, v: float) -> Check | None:
    """(context → (verdict, n)) for `verifier` on `summary`, or None when it is not compiled."""
    build = KERNELS.get(type(verifier))
    if build is None or summary.windows is not None:
        return None  # the kernels read the sorted runs / moments of a DuckDB summary
    return build(summary, space, verifier, float(v))


@kernel(Lof)
def _lof(summary: CellSummary, space: ContextSpace, verifier: Lof, v: float) -> Check:
    # LOF's kernel (`engine.lof_checks`, `core.verifiers.lof_kernel`) reads the sorted runs;
    # membership is compiled too, and the check itself refuses an empty population.
    from pcor_sql.engine import lof_checks

    return lof_checks.lof_check(summary, space, verifier, v)


class _Moments:
    """What the moment and histogram kernels share: the context bits of every cell, the cells'
    statistics, and the reference path for a context a kernel cannot decide."""

    def __init__(self, summary: CellSummary, space: ContextSpace, verifier: Verifier, v: float):
        # The kernels import numba (0.4-1 s): only a run that uses them pays for it.
        from pcor_sql.core.jit import NO_INDEX, WALK_CELLS, cell_index, flat_bits
        from pcor_sql.core.verifiers.moment_kernel import cell_stats

        # The record's own value of attribute 0 is in every context checked (admissible contexts).
        self.flat = flat_bits(summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
        # A narrow summary scans its few cells (~1.5 ns each) faster than it would count values.
        wide = summary.count.size >= WALK_CELLS
        self.index = cell_index(summary.coords, space.offsets, space.t) if wide else NO_INDEX
        self.n_words = (space.t + 63) // 64
        self.stats = cell_stats(summary.count, summary.s1, summary.s2, summary.vmin, summary.vmax)
        self.summary, self.space, self.verifier, self.v = summary, space, verifier, v

    def reference(self, mask: int) -> bool:
        s = self.summary
        return bool(self.verifier.check(s.population(s.member(self.space, mask), self.v)))


@kernel(Histogram)
def _histogram(summary: CellSummary, space: ContextSpace, verifier: Histogram, v: float) -> Check:
    from pcor_sql.core import jit
    from pcor_sql.core.jit import context_words
    from pcor_sql.core.verifiers.histogram_kernel import FALLBACK, histogram_kernel
    from pcor_sql.core.verifiers.moment_kernel import TRUE

    m = _Moments(summary, space, verifier, v)
    flat, index, stats, n_words, reference = m.flat, m.index, m.stats, m.n_words, m.reference
    runs = summary.runs()
    if summary.count.size >= jit.WALK_CELLS:
        return _histogram_walked(m, runs, float(verifier.rel))
    probe = runs.probe(v)  # rungs around v in every run (built once per value, a few kept)
    values, rel = runs.values, float(verifier.rel)
    neg_a, rungs, A, B = probe.neg_a, probe.b, probe.A, probe.B

    def histogram(mask: int) -> tuple[bool, int]:
        x, words = context_words(mask, n_words)
        code, n = histogram_kernel(x, words, flat, index, stats, values, neg_a, rungs, A, B, v, rel)
        _nonempty(n)
        return (code == TRUE if code != FALLBACK else reference(mask)), int(n)

    return histogram


def _histogram_walked(m: _Moments, runs: Any, rel: float) -> Check:
    """The histogram check of a wide summary (`core.verifiers.histogram_walk`): N, min, max and
    the rows per value in a window around v carried along the moves. A batch that is one BFS
    node's neighbours is checked from the node where that costs less (`histogram_node`, the
    rule of `lof_checks.node_pays`)."""
    import math

    import numpy as np

    from pcor_sql.core.verifiers.histogram_kernel import FALLBACK
    from pcor_sql.core.verifiers.histogram_walk import histogram_walk
    from pcor_sql.core.verifiers.lof_walk import record_positions
    from pcor_sql.core.verifiers.moment_kernel import TRUE
    from pcor_sql.core.verifiers.window_counts import cell_rows
    from pcor_sql.core.jit import cell_index, context_words, flat_bits
    from pcor_sql.engine.grid_layout import grid_layout
    from pcor_sql.core.verifiers.walk_batches import words_of
    from pcor_sql.engine.lof_checks import WalkStates, node_of, node_pays, window_of, window_range

    v, n_words, reference, summary, space = m.v, m.n_words, m.reference, m.summary, m.space
    # The walk numbers the cells in grid order (`engine.grid_layout`: a move's slab is read in order).
    layout = grid_layout(summary)
    sample, runs = runs.sample(), layout.runs
    flat = flat_bits(layout.coords, space.offsets, space.offsets[0] + space.anchor[0])
    index = cell_index(layout.coords, space.offsets, space.t)
    values = np.ascontiguousarray(runs.values, dtype=np.float64)
    starts = np.ascontiguousarray(runs.starts, dtype=np.int64)
    # V's bin of a context of N rows holds ~√N rows times the density around v over the mean:
    # a window of 4·√rows a side (and 64 distinct values) holds it for all but small contexts.
    a, b = window_range(sample, values.size, v, 64, max(4096, 4 * math.isqrt(values.size)))
    pos = record_positions(values, starts, v, a, b)
    wu, estart, ent, _, _, _ = window_of(values, starts, pos, v)
    rows_of = cell_rows(starts, estart, layout.vmin, layout.vmax)
    min_by_rank = np.ascontiguousarray(np.sort(layout.vmin), dtype=np.float64)
    max_by_rank = np.ascontiguousarray(np.sort(layout.vmax), dtype=np.float64)
    walk = WalkStates(summary.count.size, wu.size, 0, False, False, True, n_words, space.full,
                      (flat, index, rows_of, ent))
    window = np.array([a, b], dtype=np.float64)
    scratch = walk.scratch
    # A large context's single check reads N, min, max and V's bin off the grid's sums, the
    # cells ranked by minimum and maximum and the window's entries by value (`value_order`).
    from pcor_sql.core.verifiers.node_counts import WALK
    from pcor_sql.core.verifiers.value_order import by_value, grid_meta, histogram_direct, ranked_cells, share_gate

    lengths, sizes = np.diff(starts), tuple(len(attr.domain) for attr in space.attributes)
    grid = grid_meta(layout.coords, lengths, tuple(space.offsets), sizes)
    large = share_gate(tuple(space.offsets), sizes)
    direct = None if grid is None else (*grid, by_value(estart, ent, flat, wu.size, space.m, space.t), wu,
                                        *ranked_cells(lengths, flat, layout.vmin, layout.vmax), window, v, rel)

    def histogram(mask: int) -> tuple[bool, int]:
        if direct is not None and large(mask):
            x, words = context_words(mask, n_words)
            code, n = histogram_direct(x, words, space.t, *direct)
            if code != WALK:
                _nonempty(n)
                return (code == TRUE if code != FALLBACK else reference(mask)), int(n)
        x, words, dx, dwords, state, member, cnt, bits = walk.step(mask)
        code, n = histogram_walk(x, words, dx, dwords, flat, index, rows_of, ent, wu, min_by_rank, max_by_rank,
                                 values, starts, state, member, cnt, bits, scratch, window, v, rel)
        _nonempty(n)
        return (code == TRUE if code != FALLBACK else reference(mask)), int(n)

    bit_attr = [i for i, attr in enumerate(space.attributes) for _ in attr.domain]
    attr_of = np.asarray(bit_attr, dtype=np.int64)
    offsets = np.asarray((*space.offsets, space.t), dtype=np.int64)
    cell_min = np.ascontiguousarray(layout.vmin, dtype=np.float64)
    cell_max = np.ascontiguousarray(layout.vmax, dtype=np.float64)

    def from_node(masks: list[int], parent: int, flips: list[int]) -> list[tuple[bool, int]]:
        # A node's neighbours from the node (`core.verifiers.histogram_node`): same N, min, max
        # and window counts as the walk's; a bin wider than the window goes through the walk.
        from pcor_sql.core.verifiers.histogram_node import histogram_node_many
        from pcor_sql.core.verifiers.node_counts import WALK

        codes, ns = np.empty(len(masks), dtype=np.int64), np.empty(len(masks), dtype=np.int64)
        histogram_node_many(words_of(parent, n_words), np.asarray(flips, dtype=np.int64), attr_of, offsets, flat,
                            space.m, space.t, rows_of, ent, wu, cell_min, cell_max, window, v, rel, codes, ns)
        return [histogram(mask) if code == WALK else ((code == TRUE if code != FALLBACK else reference(mask)),
                                                      _nonempty(n))
                for code, n, mask in zip(codes.tolist(), ns.tolist(), masks)]

    def histogram_batch(masks: list[int], rows: Any = None) -> list[tuple[bool, int]]:
        from pcor_sql.core.verifiers.walk_batches import histogram_many

        node = node_of(masks)
        if node is not None and node_pays(space, bit_attr, summary.count.size, wu.size, *node):
            return from_node(masks, *node)
        ctx, prev, (state, member, cnt, bits), codes, ns = walk.batch(masks, rows)
        histogram_many(ctx, prev, flat, index, rows_of, ent, wu, min_by_rank, max_by_rank, values, starts, state,
                       member, cnt, bits, scratch, window, v, rel, codes, ns)
        return [((code == TRUE if code != FALLBACK else reference(mask)), _nonempty(n))
                for code, n, mask in zip(codes.tolist(), ns.tolist(), masks)]

    histogram.many = histogram_batch  # type: ignore[attr-defined]
    return histogram


class _Walk:
    """The last context checked and the state of its population (`moment_state`): each check
    passes the bits that differ from the last one, so its cost follows the change."""

    def __init__(self, m: _Moments):
        from pcor_sql.core.verifiers.moment_state import new_state, walk_stats

        self.n_words = m.n_words
        self.state_i, self.state_f = new_state(m.flat.shape[0])
        self.ws = walk_stats(m.stats, m.v, m.index)
        self.last: int | None = None

    def step(self, mask: int) -> tuple[int, Any, int, Any]:
        """(x, words, dx, dwords) of the context and of its difference from the last one."""
        from pcor_sql.core.jit import NO_WORDS, context_words

        x, words = context_words(mask, self.n_words)
        last, self.last = self.last, mask
        if last is None:
            return x, words, 0, NO_WORDS  # the state is fresh: the first check sums afresh
        dx, dwords = context_words(mask ^ last, self.n_words)
        return x, words, dx, dwords

    def batch(self, masks: list[int], rows: Any = None) -> tuple[Any, Any, Any, Any]:
        """(contexts, the last one's words, codes, ns) for a `walk_batches` driver over `masks`,
        which leaves the state at the last of them; `rows`, when given, are the masks' words
        already (`core.neighbour_rows`)."""
        import numpy as np

        from pcor_sql.core.verifiers.walk_batches import context_matrix, words_of

        prev = words_of(self.last, self.n_words)
        self.last = masks[-1]
        ctx = context_matrix(masks, self.n_words) if rows is None else rows
        return (ctx, prev, np.empty(len(masks), dtype=np.int64),
                np.empty(len(masks), dtype=np.int64))


@kernel(ZScore)
def _zscore(summary: CellSummary, space: ContextSpace, verifier: ZScore, v: float) -> Check:
    from pcor_sql.core import jit
    from pcor_sql.core.jit import context_words
    from pcor_sql.core.verifiers.moment_kernel import TRUE, zscore_kernel
    from pcor_sql.core.verifiers.moment_walk import zscore_walk

    m = _Moments(summary, space, verifier, v)
    flat, index, stats, n_words = m.flat, m.index, m.stats, m.n_words
    shift, z = float(summary.shift), float(verifier.z)
    if summary.count.size < jit.WALK_CELLS:

        def zscore(mask: int) -> tuple[bool, int]:
            x, words = context_words(mask, n_words)
            code, n = zscore_kernel(x, words, flat, index, stats, shift, v, z)
            _nonempty(n)
            return code == TRUE, int(n)

        return zscore
    walk = _Walk(m)
    state_i, state_f, ws = walk.state_i, walk.state_f, walk.ws
    grid = None  # `zscore_grid.grid_table`, built on the first batch (uniform's draws come in batches)

    nodes = NodeChecks(m, ws, shift, 0, z, None)

    def zscore_walked(mask: int) -> tuple[bool, int]:
        known = nodes.single(mask)
        if known is not None:
            code, n = known
        else:
            x, words, dx, dwords = walk.step(mask)
            code, n = zscore_walk(x, words, dx, dwords, flat, index, stats, ws, state_i, state_f, shift, v, z)
        _nonempty(n)
        return code == TRUE, int(n)

    def zscore_batch(masks: list[int], rows: Any = None) -> list[tuple[bool, int]]:
        from pcor_sql.core.verifiers.walk_batches import zscore_many

        nonlocal grid
        codes_ns = nodes.batch(masks)
        if codes_ns is not None:
            codes, ns = codes_ns
        else:
            if grid is None:
                from pcor_sql.core.verifiers.zscore_grid import grid_table

                grid = grid_table(stats, v, index)
            ctx, prev, codes, ns = walk.batch(masks, rows)
            zscore_many(ctx, prev, flat, index, stats, ws, grid, state_i, state_f, shift, v, z, codes, ns)
        if not ns.all():
            _nonempty(0)
        return list(zip((codes == TRUE).tolist(), ns.tolist()))

    zscore_walked.many = zscore_batch  # type: ignore[attr-defined]
    return zscore_walked


@kernel(Grubbs)
def _grubbs(summary: CellSummary, space: ContextSpace, verifier: Grubbs, v: float) -> Check:
    from pcor_sql.core import jit
    from pcor_sql.core.jit import context_words
    from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
    from pcor_sql.core.verifiers.moment_kernel import (
        TRUE, UNDECIDED, _moments, grubbs_kernel, grubbs_table, table_rows)
    from pcor_sql.core.verifiers.moment_walk import grubbs_walk

    m = _Moments(summary, space, verifier, v)
    flat, index, stats, n_words = m.flat, m.index, m.stats, m.n_words
    shift = float(summary.shift)
    table = table_rows(grubbs_table(float(verifier.alpha), max(summary.n_rows, 3)))

    alpha = float(verifier.alpha)

    def verdict(code: int, n: int, mask: int) -> tuple[bool, int]:
        _nonempty(n)
        if code == UNDECIDED:  # G between two tabulated critical values: G_crit(α, N) itself
            x, words = context_words(mask, n_words)
            n2, g = _moments(x, words, flat, index, stats, shift, v, 3)
            # `_moments` is the reference's G bit for bit, and this `Grubbs.check`'s own test.
            return bool(g > 0 and g > grubbs_critical_one(alpha, int(n2))), int(n)
        return code == TRUE, int(n)

    if summary.count.size < jit.WALK_CELLS:

        def grubbs(mask: int) -> tuple[bool, int]:
            x, words = context_words(mask, n_words)
            return verdict(*grubbs_kernel(x, words, flat, index, stats, shift, v, table), mask)

        return grubbs
    walk = _Walk(m)
    state_i, state_f, ws = walk.state_i, walk.state_f, walk.ws

    nodes = NodeChecks(m, ws, shift, 1, 0.0, table)

    def grubbs_walked(mask: int) -> tuple[bool, int]:
        known = nodes.single(mask)
        if known is not None:
            return verdict(*known, mask)
        x, words, dx, dwords = walk.step(mask)
        return verdict(*grubbs_walk(x, words, dx, dwords, flat, index, stats, ws, state_i, state_f, shift, v, table),
                       mask)

    def grubbs_batch(masks: list[int], rows: Any = None) -> list[tuple[bool, int]]:
        from pcor_sql.core.verifiers.walk_batches import grubbs_many

        codes_ns = nodes.batch(masks)
        if codes_ns is not None:
            codes, ns = codes_ns
        else:
            ctx, prev, codes, ns = walk.batch(masks, rows)
            grubbs_many(ctx, prev, flat, index, stats, ws, state_i, state_f, shift, v, table, codes, ns)
        return [verdict(code, n, mask) for code, n, mask in zip(codes.tolist(), ns.tolist(), masks)]

    grubbs_walked.many = grubbs_batch  # type: ignore[attr-defined]
    return grubbs_walked


def _nonempty(n: int) -> int:
    if n == 0:
        raise InternalError("an admissible context has an empty population")
    return int(n)
