"""Compiled steps of the per-cell summary build (issue 29, item 4): a counting sort of rows by
cell and each sorted run's moments, over numpy buffers, releasing the GIL (`jit.compiled`), so
that the engine runs them on blocks of rows or cells in as many threads as DuckDB's `threads`
setting allows (`engine.counting_runs`, `engine.run_sorting`).

Each kernel gives what the numpy code before it gave, bit for bit:
- `count_keys` + `scatter_rows`: rows in row order within each cell (a stable counting sort),
  as Arrow's counting sort of each batch followed by its copy to the cell's place did;
- `run_moments`: each run's mean and population variance as `run.sum() / n` and
  `np.square(run - mean).sum() / n` (numpy's pairwise sum, `jit.numpy_sum`).
The sort of each run stays numpy's (`ndarray.sort`, which releases the GIL too): the order of
values that compare equal but differ in their bits (−0.0 and 0.0) is then the same as before.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled, numpy_sum


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
