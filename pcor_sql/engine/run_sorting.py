"""The per-cell sorted runs built from the metric's rows grouped by cell (`CellRuns`), with
each cell's moments: blocks of cells sorted (compiled: short runs by `core.run_kernels.
sort_small_runs`, longer ones by `radix_sort_runs`; those they leave by numpy's sort, which
releases the GIL) and their moments taken
(`core.run_kernels.run_moments`, compiled, releasing it too) in as many threads as the caller
gives (DuckDB's `threads` setting: `build_threads`)."""

from __future__ import annotations

import numpy as np

from pcor_sql.engine.build_threads import even_blocks, in_threads
from pcor_sql.engine.cellruns import CellRuns, gather_segments

_PARALLEL_SORT_ROWS = 1 << 18  # below this, one thread sorts faster than a pool starts


def sorted_runs(values: np.ndarray, lengths: np.ndarray, groups: np.ndarray, threads: int = 1) -> tuple[CellRuns, tuple]:
    """The per-cell sorted runs (cell i = list groups[i]) and per cell (count, mean, population
    variance, min, max); `values` is sorted in place when `groups` is every list in order."""
    from pcor_sql.core.run_kernels import RADIX_RUN, SMALL_RUN, radix_sort_runs, run_moments, sort_small_runs

    if not np.array_equal(groups, np.arange(lengths.size)):
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        values = gather_segments(values, offsets[groups], offsets[groups + 1])
        lengths = lengths[groups]
    starts = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    cells = len(lengths)
    mean, var = np.empty(cells), np.empty(cells)

    def sort_cells(block: tuple[int, int]) -> None:
        first, last = block
        left = np.empty(last - first, dtype=np.int64)
        k = sort_small_runs(values, starts, first, last, SMALL_RUN, left)
        longest = int(lengths[first:last].max()) if last > first else 0
        if k:  # the longer runs: radix-sorted, those it leaves (NaN, ±0.0, very long) by numpy
            scratch = min(longest, RADIX_RUN)
            keys, spare = np.empty(scratch, dtype=np.uint64), np.empty(scratch, dtype=np.uint64)
            k = radix_sort_runs(values, starts, left, k, keys, spare, np.zeros((8, 256), dtype=np.int64), left)
        left = left[:k]
        for a, b in zip(starts[left].tolist(), starts[left + 1].tolist()):
            values[a:b].sort()
        run_moments(values, starts, first, last, mean, var, np.empty(longest, dtype=np.float64))

    threads = threads if values.size >= _PARALLEL_SORT_ROWS else 1
    # Contiguous blocks of cells with about equal numbers of rows, a few per thread (a thread
    # slowed by other work leaves its last blocks to the others).
    in_threads(sort_cells, even_blocks(starts, 4 * threads if threads > 1 else 1), threads)
    empty = lengths == 0
    if empty.any():  # numpy's 0 / 0, whose NaN's bits are the machine's (the kernel writes numpy's nan)
        with np.errstate(invalid="ignore"):
            mean[empty] = var[empty] = np.float64(0.0) / 0
    lo, hi = values[starts[:-1]], values[starts[1:] - 1]  # a sorted run starts at its minimum
    return CellRuns(values, starts), (lengths.astype(np.int64), mean, var, lo, hi)
