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
sorted array would give. A wider request (LOF's proof asks for more room) fetches a deeper
window (depth × 4) and retries; at a depth past every cell's distinct count nothing is left
out (a_c = −inf, b_c = +inf), so the loop ends. `count_between` is answered per cell: inside
[a_c, b_c] from the window; a part outside it is known when the interval reaches past the
cell's own minimum or maximum (from the summary) — then it is all of the cell's rows beyond
the window, counted by `rows_side`; otherwise one range count per cell is read
(`sqltext.build.cell_range_counts`, cells rows, cached by interval). `values()` — every value
of a context, what user Python verifiers read — is refused: it is the table itself.

`rows_read` counts every row the reader pulled, so callers can show what left the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from pcor_sql.engine.schema import Schema
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import METRIC_ALIAS, cell_range_counts, cell_windows

#: Distinct values per cell and side read first. LOF(k = 20) reads about 6.5·(k + 1) values
#: around v in a context; a one-cell context needs that many from one cell.
START_DEPTH = 128
_GROWTH = 4

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
    depth: int

    @property
    def complete(self) -> bool:
        return bool(np.all(np.isneginf(self.lo_edge)) and np.all(np.isposinf(self.hi_edge)))


class WindowReader:
    """Reads and caches per-cell windows (by v) and range counts (by interval) of one summary's
    relation through `run(sql) -> Arrow`, the engine's SELECT runner."""

    def __init__(self, run: Run, schema: Schema, coords: np.ndarray, vmin: np.ndarray, vmax: np.ndarray,
                 start_depth: int = START_DEPTH):
        self._run = run
        self.schema = schema
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
            w = self._windows[v] = self._fetch(v, self._start_depth)
        return w

    def widen(self, v: float) -> CellWindows:
        w = self.window(v)
        if w.complete:
            raise InternalError("a complete window was asked to grow")
        w = self._windows[v] = self._fetch(v, w.depth * _GROWTH)
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

    def _fetch(self, v: float, depth: int) -> CellWindows:
        s = self.schema
        table = self._read(cell_windows(s.names, s.metric_sql, s.relation_sql, v, depth))
        cells = self._cells(table)
        values = _column(table, METRIC_ALIAS)
        counts = _column(table, "n", np.int64)
        side = _column(table, "side", np.int64)
        short = _column(table, "distinct_side", np.int64) > depth  # that side of the cell was cut
        n_cells = len(self._cell_key)
        lo_edge = np.full(n_cells, -math.inf)
        hi_edge = np.full(n_cells, math.inf)
        below_rest = np.zeros(n_cells, dtype=np.int64)
        above_rest = np.zeros(n_cells, dtype=np.int64)
        rows_side = _column(table, "rows_side", np.int64)
        fetched = np.zeros((n_cells, 3), dtype=np.int64)
        np.add.at(fetched, (cells, side + 1), counts)
        for s_val, edge, rest in ((-1, lo_edge, below_rest), (1, hi_edge, above_rest)):
            cut = short & (side == s_val)
            if not cut.any():
                continue
            c = cells[cut]
            # The farthest fetched value of the side: the smallest below v, the largest above.
            far = np.full(n_cells, math.inf if s_val < 0 else -math.inf)
            (np.minimum if s_val < 0 else np.maximum).at(far, c, values[cut])
            edge[c] = far[c]
            rest[c] = rows_side[cut] - fetched[c, s_val + 1]
        order = np.argsort(values, kind="stable")
        return CellWindows(values[order], counts[order], cells[order], lo_edge, hi_edge, below_rest, above_rest, depth)

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


@dataclass
class WindowPopulation:
    """A context's population (the `Population` protocol): moments from the summary, values
    from the per-cell windows. `moments` is the summary's own population of the context."""

    moments: Any
    reader: WindowReader
    member: np.ndarray

    @property
    def n(self) -> int:
        return self.moments.n

    @property
    def mean(self) -> float:
        return self.moments.mean

    @property
    def m2(self) -> float:
        return self.moments.m2

    @property
    def min(self) -> float:
        return self.moments.min

    @property
    def max(self) -> float:
        return self.moments.max

    @property
    def v(self) -> float:
        return self.moments.v

    def _bounds(self, w: CellWindows) -> tuple[float, float]:
        """[L, U]: where every cell of the context holds all of its values."""
        return float(w.lo_edge[self.member].max(initial=-math.inf)), float(w.hi_edge[self.member].min(initial=math.inf))

    def between(self, lo: float, hi: float) -> np.ndarray:
        w = self.reader.window(self.v)
        while True:
            low, high = self._bounds(w)
            if low <= lo and hi <= high:
                break
            w = self.reader.widen(self.v)
        a = np.searchsorted(w.values, lo, side="left")
        b = np.searchsorted(w.values, hi, side="right")
        keep = self.member[w.cells[a:b]]
        return np.repeat(w.values[a:b][keep], w.counts[a:b][keep])

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        w = self.reader.window(self.v)
        a = np.searchsorted(w.values, lo, side="left")
        b = np.searchsorted(w.values, hi, side="right" if right_closed else "left")
        local = int(w.counts[a:b][self.member[w.cells[a:b]]].sum())
        low, high = self._bounds(w)
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

    def values(self) -> np.ndarray:
        raise UserError(
            "this verifier reads every value of each context, which would bring the whole table back from the engine",
            "use lof, histogram, grubbs or zscore here, or run the Python verifier on DuckDB",
        )


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
