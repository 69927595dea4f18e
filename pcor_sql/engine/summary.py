"""Per-cell summaries: population statistics for any context without re-scanning the table.

One GROUP BY over the context attributes (a "cell" is one combination of attribute values)
yields count, mean, variance, min and max per cell; a context's population is a union of
cells, so its moments combine exactly (Chan et al.'s parallel formula, through sums centred
on the global mean). Verifiers that need the values themselves (LOF, histogram, user Python
verifiers) read a metric-sorted array of every row tagged with its cell, loaded once and
lazily: a context's values in [lo, hi] are the tagged slice filtered by cell membership.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.schema import Schema
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import group_by_cells, select_from, sorted_cells


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
    _con: duckdb.DuckDBPyConnection = field(repr=False)
    _sorted: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _tables: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def n_rows(self) -> int:
        return int(self.count.sum())

    def sorted_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(values ascending, cell index of each value); loaded on first use."""
        if self._sorted is None:
            self._sorted = _load_sorted(self._con, self.schema, self.coords)
        return self._sorted

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


def build_summary(con: duckdb.DuckDBPyConnection, schema: Schema) -> CellSummary:
    """One GROUP BY query over the attributes; validates metric values and domains."""
    started = time.perf_counter()
    sql = group_by_cells(schema.names, schema.metric_sql, schema.relation_sql)
    try:
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise UserError(str(exc).strip().splitlines()[0], "check the relation, metric and attribute names") from None
    m = len(schema.attributes)
    bad = int(pc.sum(table.column("bad")).as_py() or 0)
    if bad:
        finite = f"{schema.metric_sql} IS NOT NULL AND isfinite({schema.metric_sql})"
        raise UserError(
            f"the metric {schema.metric_sql} is NULL, NaN or infinite in {bad} rows",
            f"filter them out, e.g. FROM ({select_from('*', schema.relation_sql, where=finite)})",
        )
    keep = np.ones(table.num_rows, dtype=bool)
    coords = np.zeros((table.num_rows, m), dtype=np.int64)
    for i, attr in enumerate(schema.attributes):
        raw = table.column(i).to_pylist()
        index = {v: j for j, v in enumerate(attr.domain)}
        for r, value in enumerate(raw):
            if value is None:
                keep[r] = False  # rows with a NULL attribute are in no population
                continue
            j = index.get(value)
            if j is None:
                raise UserError(
                    f"the data has {attr.name} = {value!r}, which is outside its declared domain",
                    f"add {value!r} to the declared domain of {attr.name}, or filter those rows out",
                )
            coords[r, i] = j
    count = np.asarray(table.column("n").to_numpy(zero_copy_only=False), dtype=np.int64)[keep]
    mean = np.asarray(table.column("mean").to_numpy(zero_copy_only=False), dtype=np.float64)[keep]
    var = np.asarray(table.column("var").to_numpy(zero_copy_only=False), dtype=np.float64)[keep]
    lo = np.asarray(table.column("lo").to_numpy(zero_copy_only=False), dtype=np.float64)[keep]
    hi = np.asarray(table.column("hi").to_numpy(zero_copy_only=False), dtype=np.float64)[keep]
    coords = coords[keep]
    if count.size == 0:
        raise UserError("no row has a non-NULL value in every context attribute", "check the attributes (--by)")
    var = np.where(lo == hi, 0.0, var)
    shift = float((count * mean).sum() / count.sum())
    d = mean - shift
    s1 = count * d
    s2 = var * count + count * d * d
    return CellSummary(schema, coords, count, s1, s2, lo, hi, shift, time.perf_counter() - started, con)


def _load_sorted(con: duckdb.DuckDBPyConnection, schema: Schema, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    table = con.sql(sorted_cells(schema.names, schema.metric_sql, schema.relation_sql)).to_arrow_table()
    sizes = [len(a.domain) for a in schema.attributes]
    key = np.zeros(table.num_rows, dtype=np.int64)
    for i, attr in enumerate(schema.attributes):
        encoded = pc.dictionary_encode(table.column(i)).combine_chunks()
        dictionary = encoded.dictionary.to_pylist()
        index = {v: j for j, v in enumerate(attr.domain)}
        # An ENUM's dictionary lists every label of the type, used or not; a label outside the
        # declared domain is harmless unless a row uses it (build_summary refused those rows).
        lookup = np.array([index.get(v, -1) for v in dictionary], dtype=np.int64)
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        mapped = lookup[codes]
        if mapped.size and mapped.min() < 0:
            raise InternalError("a row's value is outside the declared domain after the summary accepted it")
        key = key * sizes[i] + mapped
    cell_key = np.zeros(len(coords), dtype=np.int64)
    for i in range(len(sizes)):
        cell_key = cell_key * sizes[i] + coords[:, i]
    order = np.argsort(cell_key)
    pos = np.searchsorted(cell_key[order], key)
    if pos.size and (pos.max() >= len(order) or not np.array_equal(cell_key[order][pos], key)):
        raise InternalError("a row's cell is missing from the per-cell summary")
    values = table.column("m").to_numpy(zero_copy_only=False).astype(np.float64)
    return values, order[pos]


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
