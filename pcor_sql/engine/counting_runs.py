"""The per-cell sorted runs from one flat scan and a counting sort by cell (issue 22, item 3).

The GROUP BY that lists each cell's values (`sqltext.build.cell_lists`) makes DuckDB build a
list per cell in its hash table and convert the lists to Arrow: 277 of the 405 ms a 10M-row
summary took (issue 22's profile). When every context attribute is an ENUM, its values come
out of a plain `SELECT a, b, c, metric` as Arrow dictionary indices, so the cell of each row is
a mixed-radix key of small integers, and the rows are partitioned by cell without a GROUP BY:

1. one flat scan into Arrow (attributes as dictionary indices, the metric as float64);
2. each row's cell key, 16 bits (rows with a NULL attribute get the key one past the last cell,
   so they sort after every cell and are left out);
3. Arrow's sort of the keys — a counting sort for integers of a small range, in C++ (two
   passes, 12 bits each, past 4,096 cells) — and one `take` of the metric in that order: the
   values cell after cell;
4. each cell's run sorted and its moments taken (`run_sorting.sorted_runs`, as the GROUP BY path).

Why Arrow's: numpy's stable argsort of 16-bit keys (a radix sort) and its fancy-index gather
are each ~5× slower on 10M rows (measured: 1.21 s and 1.21 s against 0.24 s and 0.37 s at
load 9), and lose to the GROUP BY they replace.

The runs are each cell's values, sorted: the same as the GROUP BY path gives, so every
population, window and verdict is the same; cells come in key order (domain indices,
lexicographic) instead of the hash table's. It applies where the keys are small: `read_cells`
returns None (the caller keeps the GROUP BY, nothing read) when an attribute is not an ENUM
(other types come as values, not codes) or there are 2^16 possible cells or more.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.engine.cellruns import CellRuns
from pcor_sql.engine.run_sorting import sorted_runs
from pcor_sql.engine.schema import Schema
from pcor_sql.sqltext.build import METRIC_ALIAS, as_double, quoted, select_from

MAX_KEYS = (1 << 16) - 1  # cells; one more key stands for "a NULL attribute"
_DIGIT = 1 << 12  # Arrow counts keys of this range; wider keys are sorted as two such digits


@dataclass
class CellRows:
    """The scanned rows: each row's cell key (`n_keys` for a row with a NULL attribute) and
    metric value, and what the checks need."""

    key: np.ndarray  # uint16
    values: pa.ChunkedArray  # float64, as scanned
    sizes: tuple[int, ...]
    bad_metric: int  # rows whose metric is NULL, NaN or infinite
    outside: tuple[str, Any] | None  # (attribute, value) of a row outside its declared domain

    @property
    def n_keys(self) -> int:
        return int(np.prod(self.sizes))

    def runs(self) -> tuple[np.ndarray, CellRuns, tuple]:
        """(the present cells' keys, ascending; their sorted runs; their (count, mean, var, lo, hi)).
        Consumes the scanned rows: each buffer is let go as soon as it is used, so that the
        peak is about 26 bytes per row (metric, order, runs, keys)."""
        n_keys = self.n_keys
        counts = np.bincount(self.key, minlength=n_keys + 1)
        kept = int(counts[:n_keys].sum())  # rows with a NULL attribute sort last
        # One contiguous array: `take` across DuckDB's record batches resolves each index's
        # chunk (3× slower on a 10M-row scan's 82 batches).
        chunks = [c.to_numpy(zero_copy_only=False) for c in self.values.chunks]
        self.values = pa.chunked_array([], pa.float64())
        metric = np.concatenate(chunks) if chunks else np.empty(0)
        del chunks
        order = _counting_order(self.key, n_keys).slice(0, kept)
        self.key = np.empty(0, dtype=np.uint16)
        values = pc.take(pa.array(metric), order) if kept else pa.array([], pa.float64())
        del order, metric
        present = np.flatnonzero(counts[:n_keys])
        runs, moments = sorted_runs(writable_view(values), counts[present], np.arange(present.size))
        return present, runs, moments

    def coords(self, present: np.ndarray) -> np.ndarray:
        """(cells, m) domain indices of the keys `present`."""
        coords = np.empty((present.size, len(self.sizes)), dtype=np.int64)
        rest = present.astype(np.int64)
        for i in range(len(self.sizes) - 1, -1, -1):
            coords[:, i] = rest % self.sizes[i]
            rest //= self.sizes[i]
        return coords


def _counting_order(key: np.ndarray, n_keys: int) -> pa.Array:
    """A stable order of `key` (values 0..n_keys): Arrow's sort, a counting sort in C++ for a
    range up to ~4,096 (beyond, a comparison sort ~20× slower on 10M rows, measured). A wider
    range is sorted as two digits of 12 bits, low then high (stable sorts: least significant
    digit first gives the order of the whole key)."""
    if n_keys < _DIGIT:
        return pc.array_sort_indices(pa.array(key, type=pa.uint16()))
    by_low = pc.array_sort_indices(pa.array(key % _DIGIT, type=pa.uint16()))
    high = pc.take(pa.array(key // _DIGIT, type=pa.uint16()), by_low)
    return pc.take(by_low, pc.array_sort_indices(high))


def read_cells(con: duckdb.DuckDBPyConnection, schema: Schema) -> CellRows | None:
    """The rows of `schema`'s relation as cell keys and metric values, or None where the
    counting sort does not apply (module doc): then nothing has been read."""
    sizes = tuple(len(a.domain) for a in schema.attributes)
    if int(np.prod(sizes)) > MAX_KEYS:
        return None
    relation = con.sql(select_from([*quoted(schema.names), f"{as_double(schema.metric_sql)} AS {METRIC_ALIAS}"],
                                   schema.relation_sql))
    if not all(str(t).startswith("ENUM(") for t in relation.types[:-1]):
        return None
    table = relation.to_arrow_table()
    key = np.zeros(table.num_rows, dtype=np.uint16)
    null = np.zeros(table.num_rows, dtype=bool)
    outside = None
    for i, attr in enumerate(schema.attributes):
        codes, is_null, found = _domain_codes(table.column(i), attr.domain)
        if outside is None and found is not None:
            outside = (attr.name, found)
        key *= sizes[i]
        key += codes
        if is_null is not None:
            null |= is_null
    if null.any():
        key[null] = int(np.prod(sizes))
    metric, rows = table.column(len(schema.attributes)), table.num_rows
    del table  # the attribute columns: the keys hold what is needed of them
    finite = pc.sum(pc.is_finite(metric)).as_py() or 0  # NULL is not finite (is_finite gives NULL: not counted)
    return CellRows(key, metric, sizes, rows - int(finite), outside)


def _domain_codes(column: pa.ChunkedArray, domain: tuple) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """(each row's domain index as uint16, 0 where NULL or outside; where it is NULL, or None
    if nowhere; the first value used that is outside the domain, or None)."""
    index = {v: j for j, v in enumerate(domain)}
    codes, nulls, outside = [], [], None
    for chunk in column.chunks:
        labels = chunk.dictionary.to_pylist()
        # An ENUM's dictionary lists every label of the type, used or not; a label outside the
        # declared domain is harmless unless a row uses it.
        lookup = np.array([index.get(v, -1) for v in labels] + [-2], dtype=np.int32)
        indices = chunk.indices
        null = indices.null_count > 0
        raw = (pc.fill_null(indices, len(labels)) if null else indices).to_numpy(zero_copy_only=False)
        if np.array_equal(lookup[:-1], np.arange(len(labels))) and not null:
            codes.append(raw.astype(np.uint16))  # the domain is the type's labels in order: no lookup
            nulls.append(None)
            continue
        mapped = lookup[raw]
        bad = np.flatnonzero(mapped == -1)
        if outside is None and bad.size:
            outside = labels[int(raw[bad[0]])]
        nulls.append(mapped == -2)
        codes.append(np.maximum(mapped, 0).astype(np.uint16))
    if not codes:
        return np.empty(0, dtype=np.uint16), None, None
    is_null = None
    if any(n is not None for n in nulls):
        is_null = np.concatenate([np.zeros(len(c), dtype=bool) if n is None else n for c, n in zip(codes, nulls)])
    return np.concatenate(codes), is_null, outside


def writable_view(values: pa.Array) -> np.ndarray:
    """A writable float64 ndarray on a DoubleArray's own buffer (no NULLs). Its `base` is a
    ctypes array that holds the Arrow array, so the memory lives as long as any view of it.
    Safe where nothing else holds the Arrow array (a result made for the caller)."""
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    raw = (ctypes.c_double * n).from_address(values.buffers()[1].address + values.offset * 8)
    raw.owner = values
    return np.frombuffer(raw, dtype=np.float64)
