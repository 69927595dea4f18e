"""The per-cell summary build as it was before it ran in DuckDB's threads (commit ab0d0db), frozen
here as the baseline of `benchmarks.summary_threads` and of the tests that the parallel build
(`pcor_sql.engine.counting_runs`) gives the same runs and moments: one thread computes the keys
and partitions each record batch by Arrow's counting sort; the runs are sorted and summed in
up to 8 threads, however DuckDB's `threads` is set. Not used by the package.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcor_sql.engine.cellruns import CellRuns, gather_segments
from pcor_sql.engine.schema import Schema
from pcor_sql.sqltext.build import METRIC_ALIAS, as_double, quoted, select_from

MAX_KEYS = (1 << 16) - 1
_DIGIT = 1 << 12
SORT_THREADS = max(1, min(8, os.cpu_count() or 1))
_PARALLEL_SORT_ROWS = 1 << 20


def old_build(con: duckdb.DuckDBPyConnection, schema: Schema) -> tuple[np.ndarray, CellRuns, tuple, int, Any] | None:
    """(present keys, runs, (count, mean, var, lo, hi), bad metric rows, outside) as the old
    ENUM path built them, or None where it did not apply."""
    rows = read_cells(con, schema)
    if rows is None:
        return None
    present, runs, moments = rows.runs()
    return present, runs, moments, rows.bad_metric, rows.outside


@dataclass
class CellRows:
    key: np.ndarray
    values: pa.ChunkedArray
    sizes: tuple[int, ...]
    bad_metric: int
    outside: tuple[str, Any] | None

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


def sorted_runs(values: np.ndarray, lengths: np.ndarray, groups: np.ndarray) -> tuple[CellRuns, tuple]:
    """The per-cell sorted runs (cell i = list groups[i]) and per cell (count, mean, population
    variance, min, max), each cell sorted and summed in a few threads (numpy releases the GIL)."""
    if not np.array_equal(groups, np.arange(lengths.size)):
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        values = gather_segments(values, offsets[groups], offsets[groups + 1])
        lengths = lengths[groups]
    starts = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    cells = len(lengths)
    mean, var = np.empty(cells), np.empty(cells)
    bounds = list(zip(starts[:-1].tolist(), starts[1:].tolist()))

    def sort_cells(block: range) -> None:
        for c in block:
            run = values[bounds[c][0] : bounds[c][1]]
            run.sort()
            mean[c] = mu = run.sum() / run.size
            var[c] = np.square(run - mu).sum() / run.size

    workers = min(SORT_THREADS, cells)
    if workers <= 1 or values.size < _PARALLEL_SORT_ROWS:
        sort_cells(range(cells))
    else:
        # Contiguous blocks of cells with about equal numbers of rows, a few per thread.
        edges = np.searchsorted(starts, np.linspace(0, values.size, 4 * workers + 1)).tolist()
        blocks = [range(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(sort_cells, blocks))
    lo, hi = values[starts[:-1]], values[starts[1:] - 1]  # a sorted run starts at its minimum
    return CellRuns(values, starts), (lengths.astype(np.int64), mean, var, lo, hi)
