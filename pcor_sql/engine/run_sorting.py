"""The per-cell sorted runs built from the metric's rows grouped by cell (`CellRuns`), with
each cell's moments, sorted in a few threads (numpy releases the GIL while sorting)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pcor_sql.engine.cellruns import CellRuns, gather_segments

SORT_THREADS = max(1, min(8, os.cpu_count() or 1))
_PARALLEL_SORT_ROWS = 1 << 20  # below this, one thread sorts faster than a pool starts


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
