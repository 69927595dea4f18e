"""Per-cell summaries: population statistics for any context without re-scanning the table.

One GROUP BY over the context attributes (a "cell" is one combination of attribute values)
yields count, mean, variance, min and max per cell; a context's population is a union of
cells, so its moments combine exactly (Chan et al.'s parallel formula, through sums centred
on the global mean). Verifiers that need the values themselves (LOF, histogram, user Python
verifiers) read a metric-sorted array of every row tagged with its cell, loaded once: a
context's values in [lo, hi] are the tagged slice filtered by cell membership. The array is
read lazily by a second, ordered query; a caller that knows it will be needed builds the
summary with `with_values=True`, and that one ordered query then yields the moments too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.schema import Schema
from pcor_sql.errors import InternalError, UserError, option_name
from pcor_sql.sqltext.build import METRIC_ALIAS, group_by_cells, select_from, sorted_cells


_TABLE_MAX_BITS = 16
_TABLE_MAX_CELLS = 1 << 24


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
    _con: duckdb.DuckDBPyConnection | None = field(repr=False)
    _sorted: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _tables: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    # An engine that cannot ship every row (Spark) serves values through per-cell windows
    # (`pcor_sql.engine.window.WindowReader`) instead of the sorted index; then `_con` is None.
    windows: Any = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return int(self.count.sum())

    def sorted_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(values ascending, cell index of each value); loaded on first use."""
        if self._sorted is None:
            if self._con is None:
                raise InternalError("this summary reads values through per-cell windows, not a sorted index")
            self._sorted = _load_sorted(self._con, self.schema, self.coords)
        return self._sorted

    def population(self, member: np.ndarray, v: float) -> Any:
        """The population of the context whose cells are `member`, for a record of value v."""
        moments = SummaryPopulation.of(self, member, v)
        return moments if self.windows is None else self.windows.population(moments, member)

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
                row = ((bits >> np.arange(size)) & 1).astype(bool)[self.coords[:, i]]
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


def build_summary(con: duckdb.DuckDBPyConnection, schema: Schema, *, with_values: bool = False) -> CellSummary:
    """The per-cell summary of `schema`'s relation; validates metric values and domains.

    By default one GROUP BY query gives the moments, and the metric-sorted values are read by a
    second query only if a verifier asks for them. A caller that knows they will be needed
    (LOF, histogram, Python verifiers: `needs_values`) passes `with_values=True`: one ordered
    query then gives both, the moments computed in numpy from the sorted rows."""
    started = time.perf_counter()
    if with_values:
        sql = sorted_cells(schema.names, schema.metric_sql, schema.relation_sql, complete_only=False)
        return _from_sorted_rows(con, schema, _run(con, sql), started)
    table = _run(con, group_by_cells(schema.names, schema.metric_sql, schema.relation_sql))
    return summary_from_moments(schema, table, started, con)


def summary_from_moments(
    schema: Schema, table: pa.Table, started: float, con: duckdb.DuckDBPyConnection | None
) -> CellSummary:
    """The summary from the rows of `group_by_cells` (attribute columns, n, bad, mean, var, lo,
    hi), whichever engine ran it; validates metric values and domains."""
    _check_metric(schema, int(pc.sum(table.column("bad")).as_py() or 0))
    codes = _domain_codes(table, schema)
    keep = np.all(codes >= 0, axis=1)  # rows with a NULL attribute are in no population
    count = _column(table, "n", np.int64)[keep]
    mean, var, lo, hi = (_column(table, name)[keep] for name in ("mean", "var", "lo", "hi"))
    return _summary(schema, codes[keep], count, mean, var, lo, hi, started, con)


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


def _summary(
    schema: Schema, coords: np.ndarray, count: np.ndarray, mean: np.ndarray, var: np.ndarray,
    lo: np.ndarray, hi: np.ndarray, started: float, con: duckdb.DuckDBPyConnection | None,
    sorted_values: tuple[np.ndarray, np.ndarray] | None = None,
) -> CellSummary:
    """Sums centred on the global mean from per-cell moments (exact combination, see the module doc)."""
    if count.size == 0:
        raise UserError("no row has a non-NULL value in every context attribute", f"check the attributes ({option_name('by')})")
    var = np.where(lo == hi, 0.0, var)
    shift = float((count * mean).sum() / count.sum())
    d = mean - shift
    s1 = count * d
    s2 = var * count + count * d * d
    return CellSummary(schema, coords, count, s1, s2, lo, hi, shift, time.perf_counter() - started, con, sorted_values)


def _from_sorted_rows(con: duckdb.DuckDBPyConnection, schema: Schema, table: pa.Table, started: float) -> CellSummary:
    """The summary and its sorted index from every row, ascending by the metric."""
    metric = _column(table, METRIC_ALIAS)
    _check_metric(schema, int(np.count_nonzero(~np.isfinite(metric))))  # NULL arrives as NaN
    codes = _domain_codes(table, schema)
    keep = np.all(codes >= 0, axis=1)
    values, codes = metric[keep], codes[keep]
    keys = _row_keys(codes, [len(a.domain) for a in schema.attributes])
    _, first, cell, count = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    cell = cell.reshape(-1)
    last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
    # Values ascend, so a cell's first row holds its minimum and its last row its maximum.
    mean = np.bincount(cell, weights=values, minlength=count.size) / count
    var = np.bincount(cell, weights=(values - mean[cell]) ** 2, minlength=count.size) / count
    return _summary(schema, codes[first], count.astype(np.int64), mean, var, values[first], values[last], started, con,
                    (values, cell))


def _load_sorted(con: duckdb.DuckDBPyConnection, schema: Schema, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    table = _run(con, sorted_cells(schema.names, schema.metric_sql, schema.relation_sql))
    codes = _domain_codes(table, schema)
    keys = _row_keys(np.vstack([coords, codes]), [len(a.domain) for a in schema.attributes])
    cell_key, key = keys[: len(coords)], keys[len(coords) :]
    order = np.argsort(cell_key)
    pos = np.searchsorted(cell_key[order], key)
    if pos.size and (pos.max() >= len(order) or not np.array_equal(cell_key[order][pos], key)):
        raise InternalError("a row's cell is missing from the per-cell summary")
    return _column(table, METRIC_ALIAS), order[pos]


@dataclass
class SummaryPopulation:
    """A context's population answered from a CellSummary (implements `Population`)."""

    summary: CellSummary
    member: np.ndarray
    v: float
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = 0.0
    max: float = 0.0

    @classmethod
    def of(cls, summary: CellSummary, member: np.ndarray, v: float) -> "SummaryPopulation":
        n = int(summary.count[member].sum())
        if n == 0:
            return cls(summary, member, v, 0, float("nan"), 0.0, float("nan"), float("nan"))
        s1 = float(summary.s1[member].sum())
        s2 = float(summary.s2[member].sum())
        lo = float(summary.vmin[member].min())
        hi = float(summary.vmax[member].max())
        if lo == hi:
            return cls(summary, member, v, n, lo, 0.0, lo, hi)
        return cls(summary, member, v, n, summary.shift + s1 / n, max(s2 - s1 * s1 / n, 0.0), lo, hi)

    def _slice(self, lo: float, hi: float, right_closed: bool = True) -> tuple[np.ndarray, np.ndarray]:
        values, cells = self.summary.sorted_values()
        a = np.searchsorted(values, lo, side="left")
        b = np.searchsorted(values, hi, side="right" if right_closed else "left")
        return values[a:b], self.member[cells[a:b]]

    def values(self) -> np.ndarray:
        values, cells = self.summary.sorted_values()
        return values[self.member[cells]]

    def between(self, lo: float, hi: float) -> np.ndarray:
        vals, keep = self._slice(lo, hi)
        return vals[keep]

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        _, keep = self._slice(lo, hi, right_closed)
        return int(np.count_nonzero(keep))


def record_cell(schema: Schema, row: dict[str, Any]) -> list[int]:
    """Domain indices of a record's attribute values (the anchor of its context space)."""
    anchor = []
    for attr in schema.attributes:
        value = row.get(attr.name)
        if value is None:
            raise UserError(
                f"the record has NULL {attr.name}, so it is in no population",
                f"pick another record or drop {attr.name} from the attributes ({option_name('by')})",
            )
        try:
            anchor.append(attr.domain.index(value))
        except ValueError:
            raise UserError(
                f"the record has {attr.name} = {value!r}, outside its declared domain",
                f"add {value!r} to the declared domain of {attr.name}",
            ) from None
    return anchor
