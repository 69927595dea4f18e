"""Per-cell summaries: population statistics for any context without re-scanning the table.

One GROUP BY over the context attributes (a "cell" is one combination of attribute values)
yields count, mean, variance, min and max per cell; a context's population is a union of
cells, so its moments combine exactly (Chan et al.'s parallel formula, through sums centred
on the global mean). Verifiers that need the values themselves (LOF, histogram, user Python
verifiers) read the metric as per-cell sorted runs (`cellruns.CellRuns`: 8 bytes per row plus
one index entry per cell): the same GROUP BY returns each cell's values as a list when the
caller asks for them (`with_values=True`; otherwise a second such query reads them on first
use), and numpy sorts each cell's list, cells spread over the cores. Range queries around the record's value then cost O(cells in the context +
values returned), whatever the table's size.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.schema import Schema
from pcor_sql.errors import InternalError, UserError
from pcor_sql.engine.cellruns import CellRuns, gather_segments
from pcor_sql.sqltext.build import group_by_cells, select_from


_TABLE_MAX_BITS = 16
_TABLE_MAX_CELLS = 1 << 24
_SORT_THREADS = max(1, min(8, os.cpu_count() or 1))
_PARALLEL_SORT_ROWS = 1 << 20  # below this, one thread sorts faster than a pool starts
_NO_VALUES = np.empty(0, dtype=np.float64)


@dataclass
class CellSummary:
    """Moments per present cell; `coords[c, i]` is the domain index of attribute i in cell c."""

    schema: Schema
    coords: np.ndarray  # (cells, m) int64
    count: np.ndarray  # (cells,) int64
    s1: np.ndarray  # Σ (x − shift) per cell
    s2: np.ndarray  # Σ (x − shift)² per cell
    vmin: np.ndarray
    vmax: np.ndarray
    shift: float
    build_seconds: float
    _con: duckdb.DuckDBPyConnection = field(repr=False)
    _runs: CellRuns | None = field(default=None, repr=False)
    _tables: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def n_rows(self) -> int:
        return int(self.count.sum())

    def runs(self) -> CellRuns:
        """The metric as per-cell sorted runs, in this summary's cell order; loaded on first use."""
        if self._runs is None:
            self._runs = _load_runs(self._con, self.schema, self.coords)
        return self._runs

    def member(self, space: ContextSpace, mask: int) -> np.ndarray:
        """Boolean over cells: is the cell inside context `mask`?"""
        keep = None
        for i in range(space.m):
            size = len(space.attributes[i].domain)
            bits = space.attribute_bits(mask, i)
            if bits == (1 << size) - 1:
                continue
            table = self._table(i, size)
            if table is not None:
                row = table[bits]
            else:
                row = _bit_array(bits, size)[self.coords[:, i]]
            keep = row.copy() if keep is None else np.logical_and(keep, row, out=keep)
        return np.ones(len(self.count), dtype=bool) if keep is None else keep

    def _table(self, i: int, size: int) -> np.ndarray | None:
        """For attribute i, membership of every cell under every selection of its values:
        a (2^size, cells) boolean table, so a context's membership is m row lookups. Only for
        small domains (the table has 2^size rows)."""
        if size > _TABLE_MAX_BITS or 2**size * len(self.count) > _TABLE_MAX_CELLS:
            return None
        table = self._tables.get(i)
        if table is None:
            selections = np.arange(2**size, dtype=np.int64)[:, None]
            table = ((selections >> self.coords[:, i][None, :]) & 1).astype(bool)
            self._tables[i] = table
        return table


def _bit_array(bits: int, size: int) -> np.ndarray:
    """Bits 0..size−1 of a Python int of any width, as a boolean array (bit j → element j)."""
    raw = np.frombuffer(bits.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, count=size, bitorder="little").view(bool)


def build_summary(con: duckdb.DuckDBPyConnection, schema: Schema, *, with_values: bool = False) -> CellSummary:
    """The per-cell summary of `schema`'s relation; validates metric values and domains.

    One GROUP BY query gives the moments. A caller that knows the values will be needed (LOF,
    histogram, Python verifiers: `needs_values`) passes `with_values=True`, and the same query
    also returns each cell's values, sorted here cell by cell (nothing sorts the whole table);
    otherwise they are read on first use by `CellSummary.runs`."""
    started = time.perf_counter()
    table = _run(con, group_by_cells(schema.names, schema.metric_sql, schema.relation_sql, runs=with_values))
    _check_metric(schema, int(pc.sum(table.column("bad")).as_py() or 0))
    codes = _domain_codes(table, schema)
    keep = np.all(codes >= 0, axis=1)  # rows with a NULL attribute are in no population
    count = _column(table, "n", np.int64)[keep]
    mean, var, lo, hi = (_column(table, name)[keep] for name in ("mean", "var", "lo", "hi"))
    runs = _runs_of(table, np.flatnonzero(keep)) if with_values else None
    del table
    return _summary(schema, codes[keep], count, mean, var, lo, hi, started, con, runs)


def _column(table: pa.Table, name: str, dtype: type = np.float64) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)


def _run(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise UserError(str(exc).strip().splitlines()[0], "check the relation, metric and attribute names") from None


def _check_metric(schema: Schema, bad: int) -> None:
    if bad:
        finite = f"{schema.metric_sql} IS NOT NULL AND isfinite({schema.metric_sql})"
        raise UserError(
            f"the metric {schema.metric_sql} is NULL, NaN or infinite in {bad} rows",
            f"filter them out, e.g. FROM ({select_from('*', schema.relation_sql, where=finite)})",
        )


def _domain_codes(table: pa.Table, schema: Schema) -> np.ndarray:
    """Per row of `table` (attribute columns first), the domain index of each attribute's value;
    −1 where it is NULL. A value outside its declared domain is an input error."""
    codes = np.empty((table.num_rows, len(schema.attributes)), dtype=np.int64)
    for i, attr in enumerate(schema.attributes):
        encoded = pc.dictionary_encode(table.column(i).combine_chunks())
        dictionary = encoded.dictionary.to_pylist()
        index = {v: j for j, v in enumerate(attr.domain)}
        # An ENUM's dictionary lists every label of the type, used or not; a label outside the
        # declared domain is harmless unless a row uses it. The last slot stands for NULL.
        lookup = np.array([index.get(v, -2) for v in dictionary] + [-1], dtype=np.int64)
        raw = pc.fill_null(encoded.indices, len(dictionary)).to_numpy(zero_copy_only=False)
        codes[:, i] = lookup[raw]
        outside = np.flatnonzero(codes[:, i] == -2)
        if outside.size:
            value = dictionary[int(raw[outside[0]])]
            raise UserError(
                f"the data has {attr.name} = {value!r}, which is outside its declared domain",
                f"add {value!r} to the declared domain of {attr.name}, or filter those rows out",
            )
    return codes


def _row_keys(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    """One int64 per row of domain indices, equal exactly when the rows are equal."""
    if math.prod(sizes) < 2**62:
        key = np.zeros(len(codes), dtype=np.int64)
        for i, size in enumerate(sizes):
            key = key * size + codes[:, i]
        return key
    # Too many possible cells for one int64: number the distinct rows instead.
    return np.unique(codes, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _runs_of(table: pa.Table, groups: np.ndarray) -> CellRuns:
    """The per-cell sorted runs from the `vs` lists of a `group_by_cells(..., runs=True)`
    result: cell i is the result's row groups[i]. Each cell's values are sorted here, cells
    spread over the cores (numpy's sort releases the GIL): no sort of the whole table."""
    lists = table.column("vs")
    lengths = np.concatenate(
        [pc.list_value_length(c).to_numpy(zero_copy_only=False) for c in lists.chunks] or [np.empty(0)]
    ).astype(np.int64)
    values = np.concatenate([c.flatten().to_numpy(zero_copy_only=False) for c in lists.chunks] or [_NO_VALUES])
    if not np.array_equal(groups, np.arange(lengths.size)):
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        values = gather_segments(values, offsets[groups], offsets[groups + 1])
        lengths = lengths[groups]
    values = np.ascontiguousarray(values, dtype=np.float64)
    starts = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    _sort_runs(values, starts)
    return CellRuns(values, starts)


def _sort_runs(values: np.ndarray, starts: np.ndarray) -> None:
    """Sort values[starts[c]:starts[c+1]] in place for every cell c, in a few threads."""
    bounds = list(zip(starts[:-1].tolist(), starts[1:].tolist()))
    workers = min(_SORT_THREADS, len(bounds))
    if workers <= 1 or values.size < _PARALLEL_SORT_ROWS:
        for a, b in bounds:
            values[a:b].sort()
        return
    # Contiguous blocks of cells with about equal numbers of rows, one per task.
    edges = np.searchsorted(starts, np.linspace(0, values.size, 4 * workers + 1)[1:-1])
    blocks = np.split(np.arange(len(bounds)), np.unique(edges))

    def sort_block(cells: np.ndarray) -> None:
        for c in cells.tolist():
            values[bounds[c][0] : bounds[c][1]].sort()

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(sort_block, blocks))


def _summary(
    schema: Schema, coords: np.ndarray, count: np.ndarray, mean: np.ndarray, var: np.ndarray,
    lo: np.ndarray, hi: np.ndarray, started: float, con: duckdb.DuckDBPyConnection,
    runs: CellRuns | None = None,
) -> CellSummary:
    """Sums centred on the global mean from per-cell moments (exact combination, see the module doc)."""
    if count.size == 0:
        raise UserError("no row has a non-NULL value in every context attribute", "check the attributes (--by)")
    var = np.where(lo == hi, 0.0, var)
    shift = float((count * mean).sum() / count.sum())
    d = mean - shift
    s1 = count * d
    s2 = var * count + count * d * d
    return CellSummary(schema, coords, count, s1, s2, lo, hi, shift, time.perf_counter() - started, con, runs)


def _load_runs(con: duckdb.DuckDBPyConnection, schema: Schema, coords: np.ndarray) -> CellRuns:
    """The per-cell sorted runs of a summary built without them, in its cell order."""
    table = _run(con, group_by_cells(schema.names, schema.metric_sql, schema.relation_sql, runs=True))
    codes = _domain_codes(table, schema)
    kept = np.flatnonzero(np.all(codes >= 0, axis=1))
    keys = _row_keys(np.vstack([coords, codes[kept]]), [len(a.domain) for a in schema.attributes])
    cell_key, group_key = keys[: len(coords)], keys[len(coords) :]
    by_key = np.argsort(group_key)
    pos = np.minimum(np.searchsorted(group_key[by_key], cell_key), max(len(by_key) - 1, 0))
    if len(group_key) != len(cell_key) or not np.array_equal(group_key[by_key][pos], cell_key):
        raise InternalError("the cells of the per-cell summary and of its sorted runs differ")
    return _runs_of(table, kept[by_key[pos]])


@dataclass
class SummaryPopulation:
    """A context's population answered from a CellSummary (implements `Population`): moments
    from the member cells' sums, values from their sorted runs (`cellruns`)."""

    summary: CellSummary
    member: np.ndarray
    v: float
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = 0.0
    max: float = 0.0
    cells: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.intp), repr=False)

    @classmethod
    def of(cls, summary: CellSummary, member: np.ndarray, v: float) -> "SummaryPopulation":
        cells = np.flatnonzero(member)
        n = int(summary.count.take(cells).sum())
        if n == 0:
            return cls(summary, member, v, 0, float("nan"), 0.0, float("nan"), float("nan"), cells)
        s1 = float(summary.s1.take(cells).sum())
        s2 = float(summary.s2.take(cells).sum())
        lo = float(summary.vmin.take(cells).min())
        hi = float(summary.vmax.take(cells).max())
        if lo == hi:
            return cls(summary, member, v, n, lo, 0.0, lo, hi, cells)
        return cls(summary, member, v, n, summary.shift + s1 / n, max(s2 - s1 * s1 / n, 0.0), lo, hi, cells)

    def values(self) -> np.ndarray:
        out = self.summary.runs().gather(self.cells)
        out.sort()
        return out

    def between(self, lo: float, hi: float) -> np.ndarray:
        return self.summary.runs().probe(self.v).between(self.cells, lo, hi)

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        return self.summary.runs().probe(self.v).count(self.cells, lo, hi, right_closed)

    def around(self, count: int) -> tuple[float, float]:
        return self.summary.runs().probe(self.v).around(self.cells, count)


def record_cell(schema: Schema, row: dict[str, Any]) -> list[int]:
    """Domain indices of a record's attribute values (the anchor of its context space)."""
    anchor = []
    for attr in schema.attributes:
        value = row.get(attr.name)
        if value is None:
            raise UserError(
                f"the record has NULL {attr.name}, so it is in no population",
                f"pick another record or drop {attr.name} from the attributes (--by)",
            )
        try:
            anchor.append(attr.domain.index(value))
        except ValueError:
            raise UserError(
                f"the record has {attr.name} = {value!r}, outside its declared domain",
                f"add {value!r} to the declared domain of {attr.name}",
            ) from None
    return anchor
