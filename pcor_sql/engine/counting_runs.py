"""The per-cell sorted runs from one flat scan and a counting sort by cell (DESIGN.md §10
"Building the summary").

The GROUP BY that lists each cell's values (`sqltext.build.cell_lists`) makes DuckDB build a
list per cell in its hash table and convert the lists to Arrow: 277 of the 405 ms a 10M-row
summary took (`python -m benchmarks profile-release`). When every context attribute is an ENUM, its values come
out of a plain `SELECT enum_code(a), ..., metric` as their codes, so the cell of each row is
a mixed-radix key of small integers, and the rows are partitioned by cell without a GROUP BY:

1. one flat scan into Arrow (each attribute as its ENUM code, the metric as float64);
2. each row's cell key, 16 bits (rows with a NULL attribute get the key one past the last cell,
   and are left out), and each block of record batches' count of rows per key;
3. a counting sort: each block copies its rows' values to their cells' places, from the cell's
   start plus the rows of the blocks before it (`core.run_kernels.scatter_rows`), so within a
   cell the rows keep their order, whatever the blocks;
4. each cell's run sorted and its moments taken (`run_sorting.sorted_runs`, as the GROUP BY path).

Steps 2–4 run in blocks over DuckDB's `threads` (`build_threads`: compiled kernels and numpy
calls that release the GIL). Before the threaded build (`benchmarks.summary_build_old`) steps
2–3 ran in one thread (Arrow's counting
sort of each batch and a `take`, then a numpy scatter) and step 4 in up to 8 whatever `threads`
said: the build took 371 of a 553 ms fresh 10M-row release on 16 cores while DuckDB's sort
used them all. The runs and moments are byte for byte
those of that build (tests/engine/test_parallel_build.py against `benchmarks.summary_build_old`).

The runs are each cell's values, sorted: the same as the GROUP BY path gives, so every
population, window and verdict is the same; cells come in key order (domain indices,
lexicographic) instead of the hash table's. It applies where the keys are small: `read_cells`
returns None (the caller keeps the GROUP BY, nothing read) when an attribute is not an ENUM
(other types come as values, not codes) or there are `MAX_KEYS` possible cells or more. Keys
are 16 bits up to 2^16 − 1 cells and 32 bits past that: the births shape's 85,680 cells took
the GROUP BY before, whose lists cost 2.3× the counting sort's build (128 against 48 ms at load 7,
against a 40 ms sort of the metric; `python -m benchmarks scale --cases births`).

Measured: `python -m benchmarks scale` (against the GROUP BY) and `python -m benchmarks summary-threads`
(the old build against this one at threads = 1, 2, 16); figures in BENCHMARKS.md.
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
from pcor_sql.engine.build_threads import even_blocks, in_threads
from pcor_sql.engine.run_sorting import sorted_runs
from pcor_sql.engine.schema import Schema
from pcor_sql.sqltext.build import METRIC_ALIAS, as_double, quoted, select_from

#: The most possible cells (one more key stands for "a NULL attribute"): the per-key counts
#: are O(cells) per block, so a product of domains far past the rows is left to the GROUP BY.
MAX_KEYS = (1 << 20) - 1
_SHORT_KEYS = (1 << 16) - 1  # up to this many cells a key is 16 bits (half the memory of 32)
#: The most per-key counts of all blocks together (int64s: 32 MiB), whatever the threads.
_COUNTS = 1 << 22


@dataclass
class CellRows:
    """The scanned rows: each row's cell key (`n_keys` for a row with a NULL attribute) and
    metric value, in blocks of DuckDB's record batches with each block's count of rows per key;
    and what the checks need."""

    key: np.ndarray  # uint16 (uint32 past 2^16 − 1 cells), every row
    values: list[np.ndarray]  # float64, batch by batch (views of the scanned Arrow buffers)
    blocks: list[tuple[int, int]]  # [first, last) batches of each block
    block_counts: np.ndarray  # (blocks, n_keys + 1) rows per key in each block
    sizes: tuple[int, ...]
    bad_metric: int  # rows whose metric is NULL, NaN or infinite
    outside: tuple[str, Any] | None  # (attribute, value) of a row outside its declared domain

    @property
    def n_keys(self) -> int:
        return int(np.prod(self.sizes))

    def runs(self, threads: int = 1) -> tuple[np.ndarray, CellRuns, tuple]:
        """(the present cells' keys, ascending; their sorted runs; their (count, mean, var, lo, hi)).

        A counting sort over the blocks of batches in up to `threads` threads
        (`core.run_kernels.scatter_rows`): each block copies its rows to their cells' places,
        from the cell's start plus the rows of earlier blocks, so within a cell rows keep their
        order whatever the number of threads; then each cell's run is sorted (`sorted_runs`)."""
        from pcor_sql.core.run_kernels import scatter_rows

        n_keys = self.n_keys
        counts = self.block_counts.sum(axis=0)
        starts = np.zeros(n_keys + 2, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        out = np.empty(int(starts[n_keys]), dtype=np.float64)  # rows with a NULL attribute are left out
        cursors = starts[:-1] + np.cumsum(self.block_counts, axis=0) - self.block_counts  # each block's first places
        row_starts = np.cumsum([0] + [v.size for v in self.values])

        def scatter(b: int) -> None:
            cursor = cursors[b].copy()
            first, last = self.blocks[b]
            for j in range(first, last):
                scatter_rows(self.key[row_starts[j] : row_starts[j + 1]], self.values[j], cursor, n_keys, out)

        in_threads(scatter, range(len(self.blocks)), threads)
        self.values, self.key = [], np.empty(0, dtype=self.key.dtype)
        present = np.flatnonzero(counts[:n_keys])
        runs, moments = sorted_runs(out, counts[present], np.arange(present.size), threads)
        return present, runs, moments

    def coords(self, present: np.ndarray) -> np.ndarray:
        """(cells, m) domain indices of the keys `present`."""
        coords = np.empty((present.size, len(self.sizes)), dtype=np.int64)
        rest = present.astype(np.int64)
        for i in range(len(self.sizes) - 1, -1, -1):
            coords[:, i] = rest % self.sizes[i]
            rest //= self.sizes[i]
        return coords


def read_cells(con: duckdb.DuckDBPyConnection, schema: Schema, threads: int = 1) -> CellRows | None:
    """The rows of `schema`'s relation as cell keys and metric values, or None where the
    counting sort does not apply (module doc): then nothing has been read. The keys and
    counts are computed in blocks of batches in up to `threads` threads."""
    from pcor_sql.core.run_kernels import count_keys

    sizes = tuple(len(a.domain) for a in schema.attributes)
    n_keys = int(np.prod(sizes))
    if n_keys > MAX_KEYS:
        return None
    metric = f"{as_double(schema.metric_sql)} AS {METRIC_ALIAS}"
    types = con.sql(select_from([*quoted(schema.names), metric], schema.relation_sql)).types[:-1]  # bound, not run
    if not all(str(t).startswith("ENUM(") for t in types):
        return None
    batches = con.sql(scan_sql(schema)).to_arrow_table().to_batches()
    m = len(schema.attributes)
    row_starts = np.cumsum([0] + [b.num_rows for b in batches])
    key = np.zeros(int(row_starts[-1]), dtype=np.uint16 if n_keys <= _SHORT_KEYS else np.uint32)
    blocks = even_blocks(row_starts, _blocks(threads, len(batches), n_keys))
    block_counts = np.zeros((len(blocks), n_keys + 1), dtype=np.int64)
    lookups = [_Lookup(a.domain, dict(t.children)["values"]) for a, t in zip(schema.attributes, types)]
    values: list[np.ndarray] = [np.empty(0)] * len(batches)

    def read_block(b: int) -> tuple[list[Any], int]:
        """The block's keys, counts and metric arrays; (first outside value per attribute, or
        None; rows whose metric is NULL, NaN or infinite)."""
        outside: list[Any] = [None] * m
        bad = 0
        for j in range(*blocks[b]):
            batch, a = batches[j], int(row_starts[j])
            part, null = key[a : a + batch.num_rows], np.zeros(batch.num_rows, dtype=bool)
            for i in range(m):
                found = _add_codes(part, null, batch.column(i), lookups[i], sizes[i])
                if outside[i] is None and found is not None:
                    outside[i] = found
            if null.any():
                part[null] = n_keys
            values[j] = batch.column(m).to_numpy(zero_copy_only=False)  # NULL as NaN: not finite
            bad += count_keys(part, values[j], block_counts[b])
        return outside, bad

    found = in_threads(read_block, range(len(blocks)), threads)
    del batches  # the attribute columns: the keys hold what is needed of them
    outside = next(((attr.name, f[0][i]) for i, attr in enumerate(schema.attributes)
                    for f in found if f[0][i] is not None), None)
    return CellRows(key, values, blocks, block_counts, sizes, sum(f[1] for f in found), outside)


def scan_sql(schema: Schema) -> str:
    """The flat scan: each attribute as its ENUM code (DuckDB's `enum_code`, an unsigned
    integer, NULL kept) — less scan time than the ENUMs as Arrow dictionaries (10M rows, 3
    attributes, 1 thread: 74 against 103 ms at load 2, 104 against 118 ms at load 4) — and
    the metric as DOUBLE."""
    codes = [f"system.main.enum_code({name}) AS {name}" for name in quoted(schema.names)]
    return select_from([*codes, f"{as_double(schema.metric_sql)} AS {METRIC_ALIAS}"], schema.relation_sql)


def _blocks(threads: int, batches: int, n_keys: int) -> int:
    """How many blocks of batches: a few per thread (a thread slowed by other work leaves its
    last blocks to the others), fewer where each block's counts per key would pass 16 MiB in all,
    and fewer than the threads where even one per thread would pass `_COUNTS` (many cells)."""
    if threads <= 1:
        return 1
    return max(1, min(batches, 4 * threads, max(min(threads, _COUNTS // (n_keys + 1)), (1 << 21) // (n_keys + 1))))


class _Lookup:
    """Domain index of each code of an ENUM (−1 for a label outside the declared domain, −2 for
    NULL: the last slot), and whether the codes are the domain indices."""

    def __init__(self, domain: tuple, labels: list[Any]) -> None:
        index = {v: j for j, v in enumerate(domain)}
        self.labels = labels
        self.table = np.array([index.get(v, -1) for v in labels] + [-2], dtype=np.int32)
        self.identity = bool(np.array_equal(self.table[:-1], np.arange(len(labels))))


def _add_codes(key: np.ndarray, null: np.ndarray, codes: pa.Array, lookup: _Lookup, size: int) -> Any:
    """key ← key·size + each row's domain index (0 where NULL or outside), in place (a 10M-row
    scan's fresh temporaries cost page faults: tens of ms each); marks NULLs in `null`.
    Returns the first value used that is outside the domain, or None."""
    # An ENUM lists every label of the type, used or not; a label outside the declared domain
    # is harmless unless a row uses it.
    has_null = codes.null_count > 0
    raw = (pc.fill_null(codes, len(lookup.labels)) if has_null else codes).to_numpy(zero_copy_only=False)
    key *= size
    if lookup.identity and not has_null:
        key += raw  # the domain is the type's labels in order: the codes are the indices
        return None
    mapped = lookup.table[raw]
    null |= mapped == -2
    key += np.maximum(mapped, 0).astype(key.dtype)
    bad = np.flatnonzero(mapped == -1)
    return lookup.labels[int(raw[bad[0]])] if bad.size else None


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
