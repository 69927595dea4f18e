"""A wide summary's cells renumbered in grid order, for the window walks (`core.verifiers.window_counts`).

A walk's move enters or leaves a slab of cells — one value of one attribute × the context's
values of the others (`core.cell_moves`) — and reads, per cell, its flag, its row of
`window_counts.cell_rows` and its window entries. In the summary's own order (DuckDB's GROUP BY
order) a slab's cells lie anywhere, so each costs a few cache misses: ~20 ns a cell, a check
after a two-value move on the births shape ~380 µs (2 × up to 12,240 cells). Numbered in grid
order — attribute 0 varying fastest, the order `jit.cell_index` enumerates a slab in — the
cells of a slab of the last attribute are one block, of the others runs of blocks: the walk
reads its arrays front to back.

A relabelling only: the walk's cell w is the summary's cell perm[w], with that cell's
coordinates and run of values, so every count, N, min and max a walk carries is the same sum
over the same rows (integers: the order does not matter), and so is every verdict. Built once
per summary (a copy of the runs: 8 bytes a row, ~3 ms on 372,555 rows) and kept with its runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pcor_sql.engine.cellruns import CellRuns, gather_segments

if TYPE_CHECKING:
    from pcor_sql.engine.summary import CellSummary


@dataclass(frozen=True)
class GridLayout:
    """The cells in grid order: walk cell w is the summary's cell perm[w]."""

    perm: np.ndarray  # int64 (cells,)
    coords: np.ndarray  # int64 (cells, m): coords[perm]
    runs: CellRuns  # the runs of perm[0], perm[1], ...
    vmin: np.ndarray
    vmax: np.ndarray


def grid_layout(summary: CellSummary) -> GridLayout:
    """The summary's cells in grid order (attribute 0 fastest), built on first use and kept
    with the summary's runs."""
    runs = summary.runs()
    kept = runs.layout
    if kept is not None:
        return kept
    coords = np.asarray(summary.coords)
    perm = np.lexsort(coords.T) if coords.shape[1] else np.arange(coords.shape[0])  # last key primary
    perm = perm.astype(np.int64)
    lengths = np.diff(runs.starts)[perm]
    starts = np.zeros(perm.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    values = gather_segments(runs.values, runs.starts[perm], runs.starts[perm + 1])
    layout = GridLayout(perm, np.ascontiguousarray(coords[perm]), CellRuns(values, starts),
                        np.ascontiguousarray(summary.vmin[perm]), np.ascontiguousarray(summary.vmax[perm]))
    runs.layout = layout
    return layout
