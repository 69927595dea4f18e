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
load 9), and lose to the GROUP BY they replace. Step 3 runs per record batch (`CellRows.runs`):
the sort and the take stay within the batch, in cache, and each cell's slice is then copied to
its place.

The runs are each cell's values, sorted: the same as the GROUP BY path gives, so every
population, window and verdict is the same; cells come in key order (domain indices,
lexicographic) instead of the hash table's. It applies where the keys are small: `read_cells`
returns None (the caller keeps the GROUP BY, nothing read) when an attribute is not an ENUM
(other types come as values, not codes) or there are 2^16 possible cells or more.

Measured (10M rows, 1,200 cells; BENCHMARKS.md, issue 22 items 2–5): 0.55–0.72× the GROUP
BY's build time under load 8–10 and 0.75× in a warm loop at load 2, a third of its page faults
and a lower peak RSS; in fresh releases at load 1–1.5 about the same median (454 against
441 ms), spread 275–476 ms. A compiled counting sort (numba, not a dependency here) measured
0.62× at load 2: the floor this path stays above.
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

        Batch by batch (DuckDB's record batches, ~123k rows): Arrow's counting sort of the
        batch's keys and a `take` of its metric — both within the batch, in cache — give its
        rows cell after cell; each cell's slice is then copied to its place in the output (the
        cell's start plus its rows in earlier batches). One global `take` instead reads 80 MB
        at random (1,200 interleaved strides at 10M rows): 70–290 ms by how the pages fall,
        against a GROUP BY's steady 430 ms (measured in fresh releases at load 0.5)."""
        n_keys = self.n_keys
        offsets = np.cumsum([0] + [len(c) for c in self.values.chunks])
        per_batch = [np.bincount(self.key[a:b], minlength=n_keys + 1) for a, b in zip(offsets[:-1], offsets[1:])]
        counts = np.sum(per_batch, axis=0) if per_batch else np.zeros(n_keys + 1, dtype=np.int64)
        starts = np.zeros(n_keys + 2, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        kept = int(starts[n_keys])  # rows with a NULL attribute have the last key: left out
        out = np.empty(kept, dtype=np.float64)
        cursor = starts[:-1].copy()  # where each cell's next rows go
        for chunk, a, b, batch_counts in zip(self.values.chunks, offsets[:-1], offsets[1:], per_batch):
            key = self.key[a:b]
            order = _counting_order(key, n_keys)
            values = pc.take(chunk, order).to_numpy(zero_copy_only=False)
            rows = batch_counts[:n_keys]
            cells = np.flatnonzero(rows)
            # In `values` the cells come in key order, each slice contiguous: slice j goes to
            # cursor[cell j] onwards. One vectorised scatter of piecewise-contiguous targets.
            length = int(rows.sum())
            first = np.cumsum(rows[cells]) - rows[cells]
            dest = np.repeat(cursor[cells] - first, rows[cells]) + np.arange(length)
            out[dest] = values[:length]
            cursor[:n_keys] += rows
        self.values, self.key = pa.chunked_array([], pa.float64()), np.empty(0, dtype=np.uint16)
        present = np.flatnonzero(counts[:n_keys])
        runs, moments = sorted_runs(out, counts[present], np.arange(present.size))
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
        found = _add_codes(key, null, table.column(i), attr.domain, sizes[i])
        if outside is None and found is not None:
            outside = (attr.name, found)
    if null.any():
        key[null] = int(np.prod(sizes))
    metric, rows = table.column(len(schema.attributes)), table.num_rows
    del table  # the attribute columns: the keys hold what is needed of them
    finite = pc.sum(pc.is_finite(metric)).as_py() or 0  # NULL is not finite (is_finite gives NULL: not counted)
    return CellRows(key, metric, sizes, rows - int(finite), outside)


def _add_codes(key: np.ndarray, null: np.ndarray, column: pa.ChunkedArray, domain: tuple, size: int) -> Any:
    """key ← key·size + each row's domain index (0 where NULL or outside), chunk by chunk in
    place (a 10M-row scan's fresh temporaries cost page faults: tens of ms each); marks NULLs
    in `null`. Returns the first value used that is outside the domain, or None."""
    index = {v: j for j, v in enumerate(domain)}
    outside, start = None, 0
    for chunk in column.chunks:
        part, flags = key[start : start + len(chunk)], null[start : start + len(chunk)]
        start += len(chunk)
        labels = chunk.dictionary.to_pylist()
        # An ENUM's dictionary lists every label of the type, used or not; a label outside the
        # declared domain is harmless unless a row uses it.
        lookup = np.array([index.get(v, -1) for v in labels] + [-2], dtype=np.int32)
        indices = chunk.indices
        has_null = indices.null_count > 0
        raw = (pc.fill_null(indices, len(labels)) if has_null else indices).to_numpy(zero_copy_only=False)
        part *= size
        if np.array_equal(lookup[:-1], np.arange(len(labels))) and not has_null:
            part += raw  # the domain is the type's labels in order: the codes are the indices
            continue
        mapped = lookup[raw]
        bad = np.flatnonzero(mapped == -1)
        if outside is None and bad.size:
            outside = labels[int(raw[bad[0]])]
        flags |= mapped == -2
        part += np.maximum(mapped, 0).astype(np.uint16)
    return outside


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
