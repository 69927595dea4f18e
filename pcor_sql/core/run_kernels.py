"""Compiled steps of the per-cell summary build (DESIGN.md §10 "Building the summary"): a counting sort of rows by
cell, the sort of short runs and each sorted run's moments, over numpy buffers, releasing the GIL (`jit.compiled`), so
that the engine runs them on blocks of rows or cells in as many threads as DuckDB's `threads`
setting allows (`engine.counting_runs`, `engine.run_sorting`).

Each kernel gives what the numpy code before it gave, bit for bit:
- `count_keys` + `scatter_rows`: rows in row order within each cell (a stable counting sort),
  as Arrow's counting sort of each batch followed by its copy to the cell's place did;
- `run_moments`: each run's mean and population variance as `run.sum() / n` and
  `np.square(run - mean).sum() / n` (numpy's pairwise sum, `jit.numpy_sum`);
- `sort_small_runs`: runs of at most `SMALL_RUN` values sorted here (insertion sort), the
  others left to numpy's sort (`ndarray.sort`, which releases the GIL too, and is faster on long
  runs). A sorted run is unique where values that compare equal have the same bits; a run
  holding both −0.0 and 0.0, or a NaN, is left to numpy's sort too, whose order of those is
  the one the build always had.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled, numpy_sum

#: Runs up to this long are sorted in `sort_small_runs`: numpy's sort call costs about a
#: microsecond of Python per run, holding the GIL (1M rows in 46,080 cells: 23 of the 28 ms the
#: runs' sorts took, cProfile).
SMALL_RUN = 48


@compiled
def count_keys(key: np.ndarray, values: np.ndarray, counts: np.ndarray) -> int:
    """counts[k] += the rows of `key` equal to k; returns how many of `values` (the same rows'
    metric, NaN where NULL) are NaN or infinite."""
    bad = 0
    for i in range(key.size):
        counts[key[i]] += 1
        if not np.isfinite(values[i]):
            bad += 1
    return bad


@compiled
def scatter_rows(key: np.ndarray, values: np.ndarray, cursor: np.ndarray, n_keys: int, out: np.ndarray) -> None:
    """Each row's value to `out[cursor[its key]]`, advancing that cursor; rows whose key is
    `n_keys` or more (a NULL attribute) are left out. Rows keep their order within a key."""
    for i in range(key.size):
        k = key[i]
        if k < n_keys:
            out[cursor[k]] = values[i]
            cursor[k] += 1


@compiled
def run_moments(values: np.ndarray, starts: np.ndarray, first: int, last: int, mean: np.ndarray,
                var: np.ndarray, scratch: np.ndarray) -> None:
    """mean[c] and var[c] of the runs values[starts[c]:starts[c + 1]], c in first..last − 1, as
    numpy computes them; `scratch` holds at least the longest run's squared deviations."""
    for c in range(first, last):
        a = starts[c]
        n = starts[c + 1] - a
        if n == 0:  # numpy's 0 / 0 (numba's would raise)
            mean[c] = np.nan
            var[c] = np.nan
            continue
        run = values[a : a + n]
        mu = numpy_sum(run, n) / n
        for i in range(n):
            d = run[i] - mu
            scratch[i] = d * d  # np.square's product, stored before it is summed
        mean[c] = mu
        var[c] = numpy_sum(scratch, n) / n


@compiled
def sort_small_runs(values: np.ndarray, starts: np.ndarray, first: int, last: int, small: int,
                    left: np.ndarray) -> int:
    """Sorts in place each run c in first..last − 1 of at most `small` values that holds no NaN
    and not both −0.0 and 0.0; writes the other runs' c to `left`, returns how many."""
    k = 0
    for c in range(first, last):
        a = starts[c]
        n = starts[c + 1] - a
        if n <= 1:
            continue
        plain = n <= small
        negative_zero = False
        positive_zero = False
        for i in range(a, a + n if plain else a):
            x = values[i]
            if x != x:
                plain = False
            elif x == 0.0:
                if np.signbit(x):
                    negative_zero = True
                else:
                    positive_zero = True
        if not plain or (negative_zero and positive_zero):
            left[k] = c
            k += 1
            continue
        for i in range(a + 1, a + n):
            x = values[i]
            j = i - 1
            while j >= a and values[j] > x:
                values[j + 1] = values[j]
                j -= 1
            values[j + 1] = x
    return k
