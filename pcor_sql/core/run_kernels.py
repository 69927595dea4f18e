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


#: Runs longer than `SMALL_RUN` and up to this long are sorted by `radix_sort_runs`; longer ones
#: by numpy (the radix sort's two scratch arrays are 16 bytes a value of the longest run).
RADIX_RUN = 1 << 20
_TOP = np.uint64(1) << np.uint64(63)


@compiled
def radix_sort_runs(values: np.ndarray, starts: np.ndarray, runs: np.ndarray, k: int, keys: np.ndarray,
                    spare: np.ndarray, counts: np.ndarray, left: np.ndarray) -> int:
    """Sorts in place each run runs[:k] of at most `keys.size` values that holds no NaN and not
    both −0.0 and 0.0 — a least-significant-byte radix sort of the doubles' bits mapped to
    unsigned integers in the order of their values (sign bit set: all bits flipped, else the
    sign bit set), a byte that every value shares skipped; 2.5 times numpy's sort of the same
    runs (10M rows in 1,200 cells: 0.11 against 0.26 s CPU). Its order is numpy's: values that
    compare equal have the same bits in such a run. Writes the other runs to `left`, returns how many."""
    out = 0
    for r in range(k):
        c = runs[r]
        a = starts[c]
        n = starts[c + 1] - a
        plain = n <= keys.size
        negative_zero = False
        positive_zero = False
        if plain:
            bits = values[a: a + n].view(np.uint64)
            for i in range(n):
                u = bits[i]
                x = values[a + i]
                if x != x:
                    plain = False
                    break
                if x == 0.0:
                    if u & _TOP:
                        negative_zero = True
                    else:
                        positive_zero = True
                keys[i] = ~u if u & _TOP else u | _TOP
        if not plain or (negative_zero and positive_zero):
            left[out] = c
            out += 1
            continue
        counts[:, :] = 0
        for i in range(n):
            u = keys[i]
            for d in range(8):
                counts[d, (u >> np.uint64(8 * d)) & np.uint64(255)] += 1
        src, dst = keys, spare
        for d in range(8):
            c_d = counts[d]
            total = 0
            for j in range(256):
                if c_d[j] == n:  # every value has this byte: the pass would move nothing
                    total = -1
                    break
                count = c_d[j]
                c_d[j] = total
                total += count
            if total < 0:
                continue
            shift = np.uint64(8 * d)
            for i in range(n):
                u = src[i]
                j = (u >> shift) & np.uint64(255)
                dst[c_d[j]] = u
                c_d[j] += 1
            src, dst = dst, src
        for i in range(n):
            u = src[i]
            bits[i] = u ^ _TOP if u & _TOP else ~u
    return out
