"""Per-cell windows around V's value: LOF and histogram checks from a read that does not grow
with the table (the Spark engine's way; any engine that runs SQL can serve it).

The embedded engine holds every row's value in one sorted array (`CellSummary.sorted_values`).
An engine whose rows live in a cluster cannot ship them, so for a record's value v it reads,
per cell c, the `depth` distinct values nearest below v and above v with their row counts
(`sqltext.build.cell_windows`): at most cells × (2·depth + 1) rows, whatever N is. The window
of cell c is then exact on [a_c, b_c] — a_c the farthest fetched value below v if values
below it were left out (−inf if none were), b_c likewise above — because every copy of a
fetched value comes with its count.

Why a context's answers are exact. A context is a union of cells. On [L, U] with
L = max a_c, U = min b_c over its cells, every cell holds all of its values, so `between(lo,
hi)` for L ≤ lo, hi ≤ U is the union of the cells' fetched values there — the values the
sorted array would give. A wider request (LOF's proof asks for more room) reads the cells of
the context whose window stops inside it again, 4× deeper, and retries; at a depth past a
cell's distinct count nothing of it is left out (a_c = −inf, b_c = +inf), so the loop ends.
`around(count)` (the values nearest to v by count, which sizes LOF's first window) is read off
the same windows, deepening the same way. `count_between` is answered per cell: inside
[a_c, b_c] from the window; a part outside it is known when the interval reaches past the
cell's own minimum or maximum (from the summary) — then it is all of the cell's rows beyond
the window, counted by `rows_side`; otherwise one range count per cell is read
(`sqltext.build.cell_range_counts`, cells rows, cached by interval). `values()` — every value
of a context, what user Python verifiers read — is refused: it is the table itself.

LOF's distinct rule for duplicates reads `distinct_between` — the context's distinct values
with their row counts, merged across cells from the fetched pairs — so a value's copies are
never expanded into rows (the plain rule and the histogram read `between`, which expands them).

`rows_read` counts every row the reader pulled, so callers can show what left the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from pcor_sql.core.verifiers.builtins import builtin_list
from pcor_sql.engine.schema import Schema
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import METRIC_ALIAS, cell_range_counts, cell_windows
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

#: Distinct values per cell and side read first. LOF(k = 20) reads about 2·(2H + k') = 124
#: values around v in a context (H = k' + 1) — distinct values under the distinct rule — so a
#: one-cell context needs that many from one cell.
START_DEPTH = 128
_GROWTH = 4
#: Deepening more than this share of the cells refetches them all (one shorter query).
_ALL_CELLS_SHARE = 0.5

Run = Callable[[str], pa.Table]


@dataclass(frozen=True)
class CellWindows:
    """The fetched (cell, value) pairs, ascending by value, and each cell's window edges."""

    values: np.ndarray  # float64, ascending
    counts: np.ndarray  # int64 rows per (cell, value)
    cells: np.ndarray  # summary cell index of each pair
    lo_edge: np.ndarray  # per cell: a_c (−inf when nothing below was left out)
    hi_edge: np.ndarray  # per cell: b_c (+inf when nothing above was left out)
    below_rest: np.ndarray  # per cell: rows below a_c, not fetched
    above_rest: np.ndarray  # per cell: rows above b_c, not fetched
    depth: np.ndarray  # per cell: distinct values per side it was read with

    def bounds(self, member: np.ndarray) -> tuple[float, float]:
        """[L, U]: where every cell of the context `member` holds all of its values."""
        return float(self.lo_edge[member].max(initial=-math.inf)), float(self.hi_edge[member].min(initial=math.inf))


class WindowReader:
    """Reads and caches per-cell windows (by v) and range counts (by interval) of one summary's
    relation through `run(sql) -> Arrow`, the engine's SELECT runner."""

    def __init__(self, run: Run, schema: Schema, coords: np.ndarray, vmin: np.ndarray, vmax: np.ndarray,
                 start_depth: int = START_DEPTH):
        self._run = run
        self.schema = schema
        self.coords = coords
        self.vmin, self.vmax = vmin, vmax
        self._cell_key = _keys(coords, schema)
        self._order = np.argsort(self._cell_key)
        self._start_depth = int(start_depth)
        self._windows: dict[float, CellWindows] = {}
        self._ranges: dict[tuple[float, float, bool], np.ndarray] = {}
        self.rows_read = 0
        self.queries = 0

    def population(self, moments: Any, member: np.ndarray) -> "WindowPopulation":
        return WindowPopulation(moments, self, member)

    def window(self, v: float) -> CellWindows:
        w = self._windows.get(v)
        if w is None:
            depth = np.full(len(self._cell_key), self._start_depth, dtype=np.int64)
            w = self._windows[v] = self._fetch(v, depth, None, None)
        return w

    def deepen(self, v: float, cells: np.ndarray) -> CellWindows:
        """The window of v with the cells `cells` (a boolean mask; each cut on some side) read
        _GROWTH times deeper; the other cells keep what they have."""
        w = self.window(v)
        if not cells.any():
            raise InternalError("a window was asked to grow no cell")
        depth = w.depth.copy()
        depth[cells] *= _GROWTH
        w = self._windows[v] = self._fetch(v, depth, cells, w)
        return w

    def range_counts(self, lo: float, hi: float, right_closed: bool) -> np.ndarray:
        key = (lo, hi, right_closed)
        counts = self._ranges.get(key)
        if counts is None:
            s = self.schema
            table = self._read(cell_range_counts(s.names, s.metric_sql, s.relation_sql, lo, hi, right_closed))
            counts = np.zeros(len(self._cell_key), dtype=np.int64)
            np.add.at(counts, self._cells(table), _column(table, "n", np.int64))
            self._ranges[key] = counts
        return counts

    # ---- reading ------------------------------------------------------------------------

    def _read(self, sql: str) -> pa.Table:
        table = self._run(sql)
        self.rows_read += table.num_rows
        self.queries += 1
        return table

    def _fetch(self, v: float, depth: np.ndarray, cells: np.ndarray | None, old: CellWindows | None) -> CellWindows:
        """Read the windows of `cells` (None: all) at their `depth`, and keep `old`'s others."""
        s = self.schema
        n_cells = len(self._cell_key)
        if cells is not None and cells.sum() > _ALL_CELLS_SHARE * n_cells:
            cells = None
        read = np.ones(n_cells, dtype=bool) if cells is None else cells
        # One depth per query: the deepest asked (a cell read deeper than asked just knows more).
        deepest = int(depth[read].max())
        depth = np.where(read, deepest, depth)
        where = None if cells is None else self._cells_predicate(np.flatnonzero(cells))
        table = self._read(cell_windows(s.names, s.metric_sql, s.relation_sql, v, deepest, where))
        rows = self._cells(table)
        values = _column(table, METRIC_ALIAS)
        counts = _column(table, "n", np.int64)
        side = _column(table, "side", np.int64)
        short = _column(table, "distinct_side", np.int64) > deepest  # that side of the cell was cut
        rows_side = _column(table, "rows_side", np.int64)
        if old is None:
            lo_edge, hi_edge = np.full(n_cells, -math.inf), np.full(n_cells, math.inf)
            below_rest, above_rest = np.zeros(n_cells, dtype=np.int64), np.zeros(n_cells, dtype=np.int64)
        else:
            lo_edge, hi_edge = np.where(read, -math.inf, old.lo_edge), np.where(read, math.inf, old.hi_edge)
            below_rest, above_rest = np.where(read, 0, old.below_rest), np.where(read, 0, old.above_rest)
        fetched = np.zeros((n_cells, 3), dtype=np.int64)
        np.add.at(fetched, (rows, side + 1), counts)
        for s_val, edge, rest in ((-1, lo_edge, below_rest), (1, hi_edge, above_rest)):
            cut = short & (side == s_val)
            if not cut.any():
                continue
            c = rows[cut]
            # The farthest fetched value of the side: the smallest below v, the largest above.
            far = np.full(n_cells, math.inf if s_val < 0 else -math.inf)
            (np.minimum if s_val < 0 else np.maximum).at(far, c, values[cut])
            edge[c] = far[c]
            rest[c] = rows_side[cut] - fetched[c, s_val + 1]
        if old is not None:
            keep = ~read[old.cells]
            values = np.concatenate([old.values[keep], values])
            counts = np.concatenate([old.counts[keep], counts])
            rows = np.concatenate([old.cells[keep], rows])
        order = np.argsort(values, kind="stable")
        return CellWindows(values[order], counts[order], rows[order], lo_edge, hi_edge, below_rest, above_rest, depth)

    def _cells_predicate(self, cells: np.ndarray) -> str:
        """`(a = .. AND b = ..) OR ...`: the rows of the given summary cells."""
        attrs = self.schema.attributes
        terms = []
        for c in cells:
            parts = [f"{quote_identifier(a.name)} = {quote_literal(a.domain[int(j)])}" for a, j in zip(attrs, self.coords[c])]
            terms.append("(" + " AND ".join(parts) + ")")
        return "(" + " OR ".join(terms) + ")"

    def _cells(self, table: pa.Table) -> np.ndarray:
        """The summary cell index of each row of `table` (attribute columns first)."""
        codes = np.empty((table.num_rows, len(self.schema.attributes)), dtype=np.int64)
        for i, attr in enumerate(self.schema.attributes):
            index = {v: j for j, v in enumerate(attr.domain)}
            column = table.column(i).to_pylist()
            try:
                codes[:, i] = [index[v] for v in column]
            except KeyError:
                raise InternalError(f"a window row has an {attr.name} outside the summary's cells") from None
        key = _keys(codes, self.schema)
        pos = np.searchsorted(self._cell_key[self._order], key)
        pos = np.minimum(pos, len(self._order) - 1)
        if key.size and not np.array_equal(self._cell_key[self._order][pos], key):
            raise InternalError("a window row's cell is missing from the per-cell summary")
        return self._order[pos]


def _from_moments(name: str) -> Any:
    """A read-only attribute of a `WindowPopulation` read from its `moments`."""
    return property(lambda self: getattr(self.moments, name), doc=f"The population's {name}, from the summary.")


@dataclass
class WindowPopulation:
    """A context's population (the `Population` protocol): moments from the summary, values
    from the per-cell windows. `moments` is the summary's own population of the context."""

    moments: Any
    reader: WindowReader
    member: np.ndarray

    # The moments and V are the summary's own: the population only adds the values.
    n = _from_moments("n")
    mean = _from_moments("mean")
    m2 = _from_moments("m2")
    min = _from_moments("min")
    max = _from_moments("max")
    v = _from_moments("v")

    def between(self, lo: float, hi: float) -> np.ndarray:
        values, counts = self._pairs(lo, hi)
        return np.repeat(values, counts)

    def distinct_between(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values in [lo, hi], ascending, with their row counts (float64): what
        LOF's distinct rule reads (`core.verifiers.lof`), without expanding a value's copies
        into rows — the windows already hold (value, count) pairs, one per cell."""
        values, counts = self._pairs(lo, hi)
        if values.size == 0:
            return values, counts.astype(np.float64)
        starts = np.flatnonzero(np.concatenate(((True,), values[1:] != values[:-1])))
        return values[starts], np.add.reduceat(counts, starts).astype(np.float64)

    def _pairs(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """The context's (value, count) pairs in [lo, hi], ascending by value (a value held by
        several cells appears once per cell), deepening the windows until they cover it."""
        w = self.reader.window(self.v)
        while True:
            low, high = w.bounds(self.member)
            if low <= lo and hi <= high:
                break
            # Deepen the cells of the context whose window stops inside [lo, hi].
            w = self.reader.deepen(self.v, self.member & ((w.lo_edge > lo) | (w.hi_edge < hi)))
        a = np.searchsorted(w.values, lo, side="left")
        b = np.searchsorted(w.values, hi, side="right")
        keep = self.member[w.cells[a:b]]
        return w.values[a:b][keep], w.counts[a:b][keep]

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        w = self.reader.window(self.v)
        a = np.searchsorted(w.values, lo, side="left")
        b = np.searchsorted(w.values, hi, side="right" if right_closed else "left")
        local = int(w.counts[a:b][self.member[w.cells[a:b]]].sum())
        low, high = w.bounds(self.member)
        if low <= lo and hi <= high:
            return local
        cells = np.flatnonzero(self.member)
        lo_e, hi_e = w.lo_edge[cells], w.hi_edge[cells]
        vmin, vmax = self.reader.vmin[cells], self.reader.vmax[cells]
        left = lo < lo_e  # the interval reaches below the cell's window
        right = hi > hi_e
        # A part beyond the window is known when the interval covers it whole: it reaches past
        # the cell's extreme and overlaps the window.
        past_max = hi >= vmax if right_closed else hi > vmax
        known = (~left | ((lo <= vmin) & (hi >= lo_e))) & (~right | (past_max & (lo <= hi_e)))
        if known.all():
            return local + int(w.below_rest[cells[left]].sum()) + int(w.above_rest[cells[right]].sum())
        return int(self.reader.range_counts(lo, hi, right_closed)[self.member].sum())

    def around(self, count: int) -> tuple[float, float]:
        """(a, b) with a ≤ v ≤ b: [a, v) holds at least `count` values or a ≤ min, and (v, b]
        at least `count` or b ≥ max — the values nearest to v, by count (LOF's first window)."""
        return self._around(count, _reach)

    def distinct_around(self, count: int) -> tuple[float, float]:
        """`around` counted in distinct values (LOF's distinct rule sizes its windows with it).
        Without it the rule counts rows, and on a metric with ties every window came up short of
        distinct values and was read again deeper: 18 Spark queries and 1.6M rows to the driver
        for one 10M-row release, against 3 queries when counted in values. A cell's first window
        holds START_DEPTH distinct values per side, so a count up to that needs no deeper read."""
        return self._around(count, _reach_distinct)

    def _around(self, count: int, reach: Callable[..., float | None]) -> tuple[float, float]:
        v = self.v
        w = self.reader.window(v)
        while True:
            low, high = w.bounds(self.member)
            mine = self.member[w.cells]
            below = np.flatnonzero(mine & (w.values < v) & (w.values >= low))[::-1]  # nearest first
            above = np.flatnonzero(mine & (w.values > v) & (w.values <= high))
            a = reach(w, below, count, low, self.min)
            b = reach(w, above, count, high, self.max)
            if a is not None and b is not None:
                return a, b
            # Too few known values on a side: deepen the context's cells cut on that side.
            grow = np.zeros_like(self.member)
            if a is None:
                grow |= self.member & np.isfinite(w.lo_edge)
            if b is None:
                grow |= self.member & np.isfinite(w.hi_edge)
            w = self.reader.deepen(v, grow)

    def values(self) -> np.ndarray:
        # `Session.verifier` refuses such a verifier before any reservation; this is the backstop.
        raise UserError(
            "this verifier reads every value of each context, which would bring the whole table back from the engine",
            f"use {builtin_list()} here, or run the Python verifier on DuckDB",
        )


def _reach(w: CellWindows, side: np.ndarray, count: int, edge: float, extreme: float) -> float | None:
    """The value where `count` known values on one side of v are reached (positions `side`,
    nearest first); the population's extreme if the side holds fewer and is wholly known;
    None if more must be read."""
    total = np.cumsum(w.counts[side])
    if total.size and total[-1] >= count:
        return float(w.values[side[int(np.searchsorted(total, count))]])
    return extreme if math.isinf(edge) else None


def _reach_distinct(w: CellWindows, side: np.ndarray, count: int, edge: float, extreme: float) -> float | None:
    """`_reach` counted in distinct values: a value several cells hold counts once."""
    values = w.values[side]
    total = np.cumsum(np.concatenate(((True,), values[1:] != values[:-1]))) if values.size else values
    if total.size and total[-1] >= count:
        return float(values[int(np.searchsorted(total, count))])
    return extreme if math.isinf(edge) else None


def _column(table: pa.Table, name: str, dtype: type = np.float64) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)


def _keys(codes: np.ndarray, schema: Schema) -> np.ndarray:
    """One integer per row of domain indices, equal exactly when the rows are (Python ints past
    int64: a context attribute product that large is refused long before)."""
    sizes = [len(a.domain) for a in schema.attributes]
    if math.prod(sizes) >= 2**62:
        raise UserError("too many cells for the windowed engine", "use fewer context attributes (--by)")
    key = np.zeros(len(codes), dtype=np.int64)
    for i, size in enumerate(sizes):
        key = key * size + codes[:, i]
    return key
