"""Rows per (distinct value, cell) of a tie-heavy metric: the distinct values of a context in a
range, with their row counts, in O(values in the range × cells) — what LOF's distinct rule for
duplicates reads (`core.verifiers.lof`), without gathering every copy of every value.

Why. The distinct rule needs the 2·(2H + k') distinct values around V (H = k' + 1, ~124 for
k = 20). On a metric with few distinct values and many copies of each (ages, rounded wages)
those hold a large share of the rows: through the sorted runs a check would gather and sort
them all. This index answers the same question from a D × cells matrix of row counts (D = the
metric's distinct values): the context's counts for the distinct values in [lo, hi] are one
matrix–vector product of those D rows with the context's cell mask. Measured on the bundled
homicides table (110,000 rows, 98 ages, 245 cells; a seeded BFS release whose start search
checks 20,000 contexts; 2 cores at load 8–12): 2.9 ms per check from the rows, 0.6–0.9 ms
with the index — the LOF arithmetic itself, as on tie-free data — against 0.2–0.4 ms for the
plain rule, which answers most of these checks with LOF = 1 from one count (V's copies).

When. Built on first use, once per set of sorted runs, only if the metric is tie-heavy enough
for the matrix to stay small: D × cells ≤ _MAX_ENTRIES (16 MiB of float64). A sample of the
runs decides first (a sample with more distinct values than the cap allows means D is too), so
a continuous metric never pays the O(rows) pass; it keeps the sorted runs, whose windows then
hold few rows per distinct value anyway.

Exactness. Counts are integers held in float64, summed by BLAS in any order: every partial sum
is an integer below 2^53 (a table has fewer rows), so each sum is exact whatever the order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pcor_sql.core.verifiers.lof_band import distinct_runs

_MAX_ENTRIES = 1 << 21  # D × cells: 16 MiB of float64


@dataclass(frozen=True)
class ValueCounts:
    """`values` (D,) ascending: the metric's distinct values; `counts` (D, cells) float64: rows
    of each value in each cell."""

    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def build(cls, values: np.ndarray, starts: np.ndarray, sample: np.ndarray) -> "ValueCounts | None":
        """The index of cell-major runs (`values`, sorted within each run `starts[c]..starts[c+1]`),
        or None when D × cells would pass _MAX_ENTRIES (`sample`, sorted, is checked first)."""
        cells = int(starts.size - 1)
        if cells < 1 or values.size == 0:
            return None
        limit = _MAX_ENTRIES // cells
        if int(np.count_nonzero(sample[1:] != sample[:-1])) + 1 > limit:
            return None
        # Run-length encode the runs: a new entry where the value changes or a cell starts.
        new = np.empty(values.size, dtype=bool)
        new[0] = True
        np.not_equal(values[1:], values[:-1], out=new[1:])
        new[starts[1:-1]] = True
        first = np.flatnonzero(new)
        run_values = values[first]
        run_counts = np.diff(np.append(first, values.size)).astype(np.float64)
        run_cells = np.searchsorted(starts, first, side="right") - 1
        distinct = np.unique(run_values)
        if distinct.size > limit:
            return None
        counts = np.zeros((distinct.size, cells))
        counts[np.searchsorted(distinct, run_values), run_cells] = run_counts
        return cls(distinct, counts)

    def around(self, member: np.ndarray, v: float, count: int, lo: float, hi: float) -> tuple[float, float]:
        """(a, b) with a ≤ v ≤ b: [a, v) holds `count` distinct values of the cells `member`, or
        a = lo (their minimum) when fewer lie below v; (v, b] likewise with hi. Reads a band of
        the table's distinct values around v, twice as wide until it holds enough."""
        d = self.values.size
        iv = int(self.values.searchsorted(v, side="left"))
        weights = member.astype(np.float64)
        half = 2 * count
        while True:
            i0, i1 = max(0, iv - half), min(d, iv + half + 1)
            present = np.flatnonzero(self.counts[i0:i1] @ weights) + i0
            below = present[present < iv]
            above = present[(present > iv) & (self.values[present] > v)]
            a = float(self.values[below[-count]]) if below.size >= count else (lo if i0 == 0 else None)
            b = float(self.values[above[count - 1]]) if above.size >= count else (hi if i1 == d else None)
            if a is not None and b is not None:
                return a, b
            half *= 2

    def between(self, member: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values x of the cells `member` (a boolean mask) with lo ≤ x ≤ hi,
        ascending, and their row counts (float64)."""
        a = int(self.values.searchsorted(lo, side="left"))
        b = int(self.values.searchsorted(hi, side="right"))
        got = self.counts[a:b] @ member.astype(np.float64)
        keep = got > 0
        return self.values[a:b][keep], got[keep]


class DistinctQueries:
    """The distinct-value queries LOF's distinct rule looks for on a population
    (`core.verifiers.lof`), for a population over sorted runs (`summary.SummaryPopulation`:
    `summary`, `member`, `v`, `min`, `max`, `between`, `around`): through the runs' ValueCounts
    when the metric has one, else from the rows."""

    __slots__ = ()
    summary: Any
    member: np.ndarray
    v: float
    min: float
    max: float

    def distinct_between(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """Distinct values in [lo, hi], ascending, with their row counts (float64)."""
        counts = self.summary.runs().value_counts()
        if counts is None:
            return distinct_runs(self.between(lo, hi))
        return counts.between(self.member, lo, hi)

    def distinct_around(self, count: int) -> tuple[float, float]:
        """`around` counted in distinct values."""
        counts = self.summary.runs().value_counts()
        if counts is None:
            return self.around(count)  # rows ≥ values: as wide or wider
        return counts.around(self.member, self.v, count, self.min, self.max)
