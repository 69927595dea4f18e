"""Per-cell windows around V's value read in two scans: what `sqltext.build.cell_windows` asks
for, without grouping and ranking the whole table (`python -m benchmarks spark-scale`).

`cell_windows` groups every row by (cell, value) and ranks each cell's side: on Spark two full
shuffles of the table (83% of a fresh 10M-row LOF release). Here the same rows come from:

1. a histogram of the rows per (cell, side, distance rung), the rung of a row being
   ⌊4·log2 |x − v|⌋ (quarter octaves, clamped; V's own copies get a rung of their own),
   reduced in the cluster to one cut-off rung per (cell, side): the first at which `target`
   rows are reached (or none: the whole side) — at most 3·cells rows, broadcast to the second
   scan;
2. the rows within distance 2^((cut + 1)/4) of v in their (cell, side) — a prefix of that
   side by distance, so every copy of every value in it — grouped by (cell, value) and
   ranked: only those rows are shuffled, and `depth` distinct values per side come back. The
   first read asks for 8·depth rows per side (room for a few copies of each value).

(Measuring a far cell's distances from its own value nearest v instead — from the summary,
written into the query as a VALUES list — resolves its side better, but the join it needs in
both scans cost more than it saved on the spark-scale table: 26 s against 17 s per read.)

Ties. `target` rows within the cut-off do not guarantee `depth` distinct values (a metric of
a few hundred distinct values holds thousands of copies of each). Each (cell, side) reports
the distinct values and rows it found within its cut-off: a side that found fewer than `depth`
values while rows were left beyond the cut-off is read again (its cells only, joined in as a
VALUES list) with a larger target, scaled by the copies per value seen, at least 4× — until
every side has `depth` values or is whole. Exact whatever the rungs: the check reads the
counts, not the histogram.

The result has `cell_windows`' columns and rows — the `depth` nearest distinct values below v,
above v, and v itself, per cell, with `n`, `side` and `rows_side` exact — except
`distinct_side`, which is exact for a side read whole and otherwise a lower bound above
`depth` (its only use: `distinct_side > depth` says the side was cut). What reaches the driver
is the result (≤ cells × (2·depth + 1) rows) and nothing else, whatever N is.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.engine.window import WindowReader
from pcor_sql.errors import InternalError
from pcor_sql.sqltext.build import (
    METRIC_ALIAS, all_not_null, as_double, cell_windows, double_literal, quoted, select_from,
)
from pcor_sql.sqltext.quoting import quote_literal

_GROWTH = 4  # a refetch reads at least this many times more rows per side
_PER_OCTAVE = 4  # rungs per doubling of the distance: a cut-off holds at most ~19% more rows than asked
_ALL = 5000  # the cut-off rung of a side read whole: 2^(5001 / 4) is +inf
_OWN = -6000  # the rung of V's own copies (distance 0)
# Rows asked per side in the first read, × depth: room for ~8 copies of each value (money in cents
# at 10M rows holds ~4 per cell; measured on spark-scale's 10M-row tables at load ~2: 8.2–10.4 s
# in one read against 12.3–20.9 s in two with 4×, and 11.6 s against 10.6–11.4 s without ties).
_FIRST_TARGET = 8


def two_scan_sql(names: Sequence[str], metric_sql: str, relation_sql: str, v: float, depth: int, target: int,
                 cells_where: str | None = None, cells: Sequence[tuple] | None = None) -> str:
    """The two-scan window query (module doc): per (cell, side) the `depth` nearest distinct
    values within the distance that holds `target` rows, with `n`, `side`, `rows_side`, and
    what the cut-off held (`found_distinct`, `found_rows`). DuckDB-dialect text. `cells` (their
    attribute values) keeps those cells only, by a join with a VALUES list: a predicate naming
    hundreds of cells is evaluated row by row, interpreted (measured: 192 s for one read of 10M
    rows, against 12 s)."""
    cols = ", ".join(quoted(names))
    m = METRIC_ALIAS
    vv = double_literal(v)
    where = all_not_null(names) + ("" if cells_where is None else f" AND {cells_where}")
    rows = select_from(f"{cols}, {as_double(metric_sql)} AS {m}", relation_sql, where=where)
    if cells is not None:
        listed = ", ".join("(" + ", ".join(quote_literal(x) for x in cell) + ")" for cell in cells)
        rows = select_from(f"/*+ BROADCAST(pcor_l) */ {cols}, {m}",
                           f"({rows}) pcor_rows JOIN (VALUES {listed}) AS pcor_l({cols}) USING ({cols})")
    sided = select_from(
        f"{cols}, {m}, CASE WHEN {m} < {vv} THEN -1 WHEN {m} > {vv} THEN 1 ELSE 0 END AS side, "
        f"abs({m} - {vv}) AS pcor_d", f"({rows})")
    rung = (f"CASE WHEN pcor_d = 0 THEN {_OWN} "
            f"ELSE CAST(floor(least(greatest({_PER_OCTAVE} * log2(pcor_d), -4400.0), 4400.0)) AS INT) END")
    rungs = select_from(f"{cols}, side, {rung} AS pcor_rung", f"({sided})")
    hist = select_from(f"{cols}, side, pcor_rung, count(*) AS pcor_k", f"({rungs})",
                       group_by=f"{cols}, side, pcor_rung")
    part = f"PARTITION BY {cols}, side"
    cum = select_from(
        f"{cols}, side, pcor_rung, sum(pcor_k) OVER ({part} ORDER BY pcor_rung ROWS BETWEEN UNBOUNDED PRECEDING "
        f"AND CURRENT ROW) AS pcor_cum, sum(pcor_k) OVER ({part}) AS rows_side", f"({hist})")
    cut = select_from(
        f"{cols}, side, max(rows_side) AS rows_side, "
        f"coalesce(min(CASE WHEN pcor_cum >= {int(target)} THEN pcor_rung END), {_ALL}) AS pcor_cut",
        f"({cum})", group_by=f"{cols}, side")
    using = ", ".join([*quoted(names), "side"])
    kept = select_from(
        f"/*+ BROADCAST(pcor_c) */ {cols}, {m}, side, rows_side",
        f"({sided}) pcor_s JOIN ({cut}) pcor_c USING ({using})",
        where=f"side = 0 OR pcor_d <= pow(2.0, (pcor_cut + 1) / {_PER_OCTAVE}.0)")
    distinct = select_from(f"{cols}, {m}, side, rows_side, count(*) AS n", f"({kept})",
                           group_by=f"{cols}, {m}, side, rows_side")
    ranked = select_from(
        f"{cols}, {m}, n, side, rows_side, row_number() OVER ({part} ORDER BY side * {m}) AS pcor_r, "
        f"count(*) OVER ({part}) AS found_distinct, sum(n) OVER ({part}) AS found_rows", f"({distinct})")
    return select_from(f"{cols}, {m}, n, side, rows_side, found_distinct, found_rows", f"({ranked})",
                       where=f"pcor_r <= {int(depth)}")


def two_scan_windows(run: Callable[[str], pa.Table], names: Sequence[str], metric_sql: str, relation_sql: str,
                     v: float, depth: int, cells_where: str | None = None,
                     cells: Sequence[tuple] | None = None) -> tuple[pa.Table, int, int]:
    """(`cell_windows`' rows for the same arguments, queries run, rows read — those read again
    included), two scans per query, checked for ties (module doc). `run` runs DuckDB-dialect
    SQL on the engine; `cells` (attribute values) keeps those cells only."""
    depth = int(depth)
    width = len(names)
    target = _FIRST_TARGET * depth
    parts: list[pa.Table] = []
    queries = pulled = 0
    while True:
        table = run(two_scan_sql(names, metric_sql, relation_sql, v, depth, target, cells_where, cells))
        queries += 1
        pulled += table.num_rows
        found = _column(table, "found_distinct")
        rows_found, rows_side = _column(table, "found_rows"), _column(table, "rows_side")
        short = (found < depth) & (rows_found < rows_side)  # a side cut by the histogram, not by depth
        if not short.any():
            parts.append(table)
            break
        # Read the cells of the short sides again, with a target scaled by the copies per value
        # seen there; keep every other cell's rows as they are.
        key = _cell_keys(table, width)
        again = np.isin(key, np.unique(key[short]))
        copies = float(np.max(rows_found[short] / np.maximum(found[short], 1)))
        target = max(_GROWTH * target, int(math.ceil(2 * depth * copies)))
        if again.all():
            continue  # every cell of this read again: the same cells (no list to write)
        parts.append(table.filter(pa.array(~again)))
        retry = table.filter(pa.array(again))
        cells = sorted({tuple(retry.column(i)[j].as_py() for i in range(width)) for j in range(retry.num_rows)},
                       key=repr)
    table = pa.concat_tables(parts)
    return _as_cell_windows(table, names, depth), queries, pulled


def _as_cell_windows(table: pa.Table, names: Sequence[str], depth: int) -> pa.Table:
    """The columns of `cell_windows`: `distinct_side` exact for a side read whole, else a lower
    bound above `depth`."""
    found = _column(table, "found_distinct")
    whole = _column(table, "found_rows") == _column(table, "rows_side")
    distinct_side = np.where(whole, found, np.maximum(found, depth + 1))
    columns = [table.column(i) for i in range(len(names))]
    columns += [table.column(METRIC_ALIAS), table.column("n"), table.column("side"),
                pa.array(distinct_side, type=pa.int64()), table.column("rows_side")]
    return pa.table(columns, names=[*names, METRIC_ALIAS, "n", "side", "distinct_side", "rows_side"])


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def _cell_keys(table: pa.Table, width: int) -> np.ndarray:
    """One integer per row naming its cell (equal exactly when the attribute values are)."""
    if table.num_rows == 0:
        return np.empty(0, dtype=np.int64)
    key = np.zeros(table.num_rows, dtype=np.int64)
    for i in range(width):
        codes = pc.dictionary_encode(table.column(i).combine_chunks()).indices
        size = len(pc.unique(table.column(i)))
        key = key * max(size, 1) + np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64)
    return key


class TwoScanWindowReader(WindowReader):
    """`WindowReader` whose window reads are `two_scan_windows` instead of one `cell_windows`
    query; range counts are unchanged.

    `WindowReader._fetch` decides which cells to read and how deep, and asks `_read` for the
    text of `cell_windows`; this reader notes the request's v and cells on the way in and
    answers that one call with the two-scan rows. It checks that the text it was asked for is
    the one it answers (an InternalError otherwise), so a change of the parent's query cannot
    go unnoticed."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pending: tuple[float, np.ndarray, np.ndarray | None] | None = None
        self._where: str | None = None

    def _fetch(self, v: float, depth: np.ndarray, cells: np.ndarray | None, old: Any) -> Any:
        self._pending, self._where = (v, depth, cells), None
        try:
            return super()._fetch(v, depth, cells, old)
        finally:
            self._pending = None

    def _cells_predicate(self, cells: np.ndarray) -> str:
        self._where = super()._cells_predicate(cells)
        return self._where

    def _read(self, sql: str) -> pa.Table:
        pending, self._pending = self._pending, None
        if pending is None:
            return super()._read(sql)
        v, depth, cells = pending
        s, where = self.schema, self._where
        read = np.ones(len(depth), dtype=bool) if where is None else cells
        deepest = int(depth[read].max())
        if sql != cell_windows(s.names, s.metric_sql, s.relation_sql, v, deepest, where):
            raise InternalError("the window reader asked for a query the two-scan reader does not answer")
        # The cells to read as a VALUES list joined in, not the parent's predicate naming them.
        listed = None if where is None else [tuple(a.domain[int(j)] for a, j in zip(s.attributes, self.coords[c]))
                                             for c in np.flatnonzero(cells)]
        table, queries, pulled = two_scan_windows(self._run, s.names, s.metric_sql, s.relation_sql, v, deepest,
                                                  None, listed)
        self.rows_read += pulled
        self.queries += queries
        return table
