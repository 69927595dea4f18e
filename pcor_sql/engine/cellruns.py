"""The metric as per-cell sorted runs, and range queries around a record's value V whose cost
is O(cells in the context + values in the answer), independent of the table's size N.

Layout. `values` holds every row's metric cell-major — cell 0's rows, then cell 1's, ... —
ascending within each cell; `starts[c] .. starts[c + 1]` is cell c's run. That is the sorted
metric plus one index entry per cell: 8 bytes per row and 8 per cell.

Probes. Every range a verifier asks about contains v: LOF reads windows [a, b] ∋ v and the
copies of v, the histogram the bin of v. So per record value v the runs are probed once at
a ladder of boundaries a_0 = v ≥ a_1 ≥ ... ≥ a_L = −inf and b_0 = v ≤ b_1 ≤ ... ≤ b_L = +inf:
v ± radii growing geometrically from span·2^−52 to the span, and the values that a 2^16-value
sample of the table ranks √2^i places from v (so rungs are fine both in distance and in
counts: an isolated v still has rungs a few dozen points away). The probe stores, for every
cell c and rung j,
    A[j, c] = the position in `values` of the first x ≥ a_j in run c (searchsorted left),
    B[j, c] = the position just past the last x ≤ b_j in run c (searchsorted right).
Rounding may make rungs equal but never out of order (they are sorted), and the infinite
rungs always exist; exactness below holds for any such ladder.

Exactness of a range count over the member cells M, for lo ≤ v ≤ hi. Let jl be the first
rung with a_jl ≤ lo and jr the first with b_jr ≥ hi. In run c the first x ≥ lo lies at
A[jl, c] when jl = 0 (then lo = v = a_0), else in [A[jl, c], A[jl−1, c]] (a_jl ≤ lo < a_jl−1):
it is A[jl, c] plus the number of x < lo in that "shell". Likewise the end of [lo, hi] (or
[lo, hi)) is B[jr−1, c] plus the number of x ≤ hi (x < hi) in [B[jr−1, c], B[jr, c]); for
jr = 0 (hi = v) it is B[0, c] (right-closed) or A[0, c] (right-open, the first x ≥ v). The
count is the sum of those ends over M: two gathers of |M| positions plus a scan of the two
shells, which lie between consecutive rungs and so hold a bounded share of the answer's
scale. `between` gathers [A[jl], B[jr]) of every member run (the answer plus its shells),
keeps lo ≤ x ≤ hi and sorts: identical to slicing the context's sorted values. `around`
finds the first rungs holding `count` member values on each side (galloping from the rungs
the previous context needed). A range not containing v (no built-in verifier asks one) is
answered by a binary search in each member run.

Dense contexts. A probe also merges every cell's values between the rungs that hold about
_NEAR values of the whole table on each side of v (`Near`: values ascending, each with its
cell). Every value of every cell in that covered range is there, so for a context holding a
large share of the rows (`Window`, dense) a window or count inside the range is the merged
array filtered by membership — already sorted, no per-cell work; outside it, or for small
contexts, the run-by-run path answers. Both give the same answers (tests run both).

Costs: a probe is 2·|cells| binary searches of ≤ 2·104 boundaries (fewer rungs with many
cells, so that A and B stay ≤ 32 MiB) plus the merged neighbourhood, built once per value
(a few kept); a query is O(|M| + answer + shells), or O(merged neighbourhood) when dense.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from pcor_sql.engine.value_counts import ValueCounts

_RUNGS = 104  # rungs per side of each kind (radii from span·2^−52 to span; sample ranks √2^i)
_MAX_PROBE_ENTRIES = 2_000_000  # rungs × cells per side: a probe is at most 32 MiB
_PROBES_KEPT = 4
_NEAR = 2048  # values of the whole table per side of v that a probe merges for dense contexts
_EMPTY = np.empty(0, dtype=np.float64)


@dataclass
class CellRuns:
    """The metric, cell-major and ascending within each cell (see the module doc)."""

    values: np.ndarray  # float64 (rows,)
    starts: np.ndarray  # int64 (cells + 1,)
    _probes: dict[float, "Probe"] = field(default_factory=dict, repr=False)
    _sample: np.ndarray | None = field(default=None, repr=False)
    _counts: ValueCounts | None = field(default=None, repr=False)
    _counts_built: bool = field(default=False, repr=False)
    #: The same runs with the cells in grid order, for the window walks (`engine.grid_layout`).
    layout: Any = field(default=None, repr=False, compare=False)

    @property
    def n_cells(self) -> int:
        return int(self.starts.size - 1)

    def cell_values(self, c: int) -> np.ndarray:
        return self.values[self.starts[c] : self.starts[c + 1]]

    def gather(self, cells: np.ndarray) -> np.ndarray:
        """The values of `cells` (indices), run after run (each run ascending, not merged)."""
        return gather_segments(self.values, self.starts.take(cells), self.starts[cells + 1])

    def probe(self, v: float) -> "Probe":
        """The probe of value v (built once per value, a few kept)."""
        p = self._probes.get(v)
        if p is None:
            if len(self._probes) >= _PROBES_KEPT:
                self._probes.pop(next(iter(self._probes)))
            p = self._probes[v] = Probe.build(self, v)
        return p

    def sample(self) -> np.ndarray:
        """About 2^16 of the values, ascending: every q-th of each run, so sample ranks are
        global ranks / q (for the probes' ladders; any sample would be correct)."""
        sample = self._sample
        if sample is None:
            step = max(1, self.values.size >> 16)
            sample = self._sample = np.sort(self.values[::step])
        return sample

    def value_counts(self) -> ValueCounts | None:
        """Rows per (distinct value, cell), built on first use; None for a metric with too many
        distinct values (see `value_counts`)."""
        if not self._counts_built:
            self._counts = ValueCounts.build(self.values, self.starts, self.sample())
            self._counts_built = True
        return self._counts

    def nbytes(self) -> int:
        counts = self._counts
        extra = 0 if counts is None else counts.values.nbytes + counts.counts.nbytes
        return int(self.values.nbytes + self.starts.nbytes + extra)


@dataclass(frozen=True)
class Probe:
    """Positions of the ladder's rungs in every run, for one value v (see the module doc)."""

    runs: CellRuns
    v: float
    neg_a: np.ndarray  # −a_j, non-decreasing (so a searchsorted finds the first a_j ≤ lo)
    b: np.ndarray  # b_j, non-decreasing
    A: np.ndarray  # (left rungs, cells) int64
    B: np.ndarray  # (right rungs, cells) int64
    near: "Near"  # every cell's values nearest v, merged
    hint: list[int] = field(default_factory=lambda: [1, 1], compare=False)  # last rungs `around` chose

    @classmethod
    def build(cls, runs: CellRuns, v: float) -> "Probe":
        values, starts = runs.values, runs.starts
        cells = runs.n_cells
        per_side = max(8, min(2 * _RUNGS, _MAX_PROBE_ENTRIES // max(cells, 1)))
        a, b = _ladder(runs, v, per_side)
        A = np.empty((a.size, cells), dtype=np.int64)
        B = np.empty((b.size, cells), dtype=np.int64)
        for c in range(cells):
            s, e = int(starts[c]), int(starts[c + 1])
            run = values[s:e]
            A[:, c] = run.searchsorted(a, side="left") + s
            B[:, c] = run.searchsorted(b, side="right") + s
        return cls(runs, float(v), -a, b, A, B, Near.build(runs, v, a, b, A, B))

    def window(self, member: np.ndarray, cells: np.ndarray, dense: bool) -> "Window":
        """The queries of one context (`member` over cells, `cells` its indices); `dense`:
        the context holds a large share of the rows, so its values near v are read from the
        merged neighbourhood rather than run by run."""
        return Window(self, member, cells, dense)

    def around(self, cells: np.ndarray, count: int) -> tuple[float, float]:
        """(a, b): rungs with at least `count` values of the runs `cells` in [a, v) and in
        (v, b] — or ±inf where that side holds fewer. The search starts at the rungs the last
        call chose: consecutive contexts of a search differ by one value, so the first guess
        and its lower neighbour (read in one gather with rung 0) usually settle it."""
        jl = self._side(self.A, cells, count, 0)
        jr = self._side(self.B, cells, count, 1)
        return -float(self.neg_a[jl]), float(self.b[jr])

    def _side(self, P: np.ndarray, cells: np.ndarray, count: int, side: int) -> int:
        """The first rung j ≥ 1 whose side of v holds ≥ count values (the last rung if none)."""
        base = int(P[0].take(cells).sum())
        # Values on this side within rung r: P[0] − P[r] on the left (A falls), P[r] − P[0] on the right.
        if side == 0:
            def enough(r: int) -> bool:
                return base - int(P[r].take(cells).sum()) >= count
        else:
            def enough(r: int) -> bool:
                return int(P[r].take(cells).sum()) - base >= count
        j = _first_true(enough, P.shape[0] - 1, self.hint[side])
        self.hint[side] = j
        return j

    def _rungs(self, lo: float, hi: float) -> tuple[int, int]:
        jl = int(self.neg_a.searchsorted(-lo, side="left"))  # first a_j ≤ lo
        jr = int(self.b.searchsorted(hi, side="left"))  # first b_j ≥ hi
        return jl, jr

    def count(self, cells: np.ndarray, lo: float, hi: float, right_closed: bool) -> int:
        """Number of values x of the runs `cells` with lo ≤ x ≤ hi (or lo ≤ x < hi)."""
        v = self.v
        if not lo <= v <= hi:
            return _count_by_search(self.runs, cells, lo, hi, right_closed)
        jl, jr = self._rungs(lo, hi)
        A, B, values = self.A, self.B, self.runs.values
        if jr == 0:
            end = int((B[0] if right_closed else A[0]).take(cells).sum())
        else:
            inner = B[jr - 1].take(cells)
            shell = gather_segments(values, inner, B[jr].take(cells))
            end = int(inner.sum()) + int(np.count_nonzero(shell <= hi if right_closed else shell < hi))
        first = A[jl].take(cells)
        begin = int(first.sum())
        if jl > 0:
            shell = gather_segments(values, first, A[jl - 1].take(cells))
            begin += int(np.count_nonzero(shell < lo))
        return end - begin

    def between(self, cells: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """The values x of the runs `cells` with lo ≤ x ≤ hi, ascending."""
        if not lo <= self.v <= hi:
            return _between_by_search(self.runs, cells, lo, hi)
        jl, jr = self._rungs(lo, hi)
        got = gather_segments(self.runs.values, self.A[jl].take(cells), self.B[jr].take(cells))
        if -self.neg_a[jl] != lo or self.b[jr] != hi:  # not both at rungs: cut the shells off
            got = got[(got >= lo) & (got <= hi)]
        got.sort()
        return got


@dataclass(frozen=True)
class Near:
    """The values of every cell within the rungs [lo, hi] around v that hold about _NEAR
    values of the whole table on each side, merged into one ascending array with each
    value's cell. Every value of every cell in [lo, hi] is here, so a large context's window
    is this array filtered by membership — already sorted, O(its size), no per-cell work."""

    values: np.ndarray  # float64, ascending
    cells: np.ndarray  # int32: the cell of each value
    lo: float  # covered range: all of [lo, hi] (lo = −inf: everything below v)
    hi: float
    below: int  # values < v
    upto: int  # values ≤ v

    @classmethod
    def build(cls, runs: CellRuns, v: float, a: np.ndarray, b: np.ndarray, A: np.ndarray, B: np.ndarray) -> "Near":
        left = A[0].sum() - A.sum(axis=1)  # values of the whole table in [a_j, v)
        right = B.sum(axis=1) - B[0].sum()
        jl = min(int(np.searchsorted(left, _NEAR, side="left")), a.size - 1)
        jr = min(int(np.searchsorted(right, _NEAR, side="left")), b.size - 1)
        lens = B[jr] - A[jl]
        values = gather_segments(runs.values, A[jl], B[jr])
        cells = np.repeat(np.arange(lens.size, dtype=np.int32), lens)
        order = np.argsort(values, kind="stable")
        values, cells = values[order], cells[order]
        return cls(values, cells, float(a[jl]), float(b[jr]), int(values.searchsorted(v, side="left")),
                   int(values.searchsorted(v, side="right")))


class Window:
    """One context's range queries around v: from the merged neighbourhood (`Near`) when the
    context is dense there, else run by run through the probe's rungs. Same answers."""

    __slots__ = ("probe", "member", "cells", "dense", "_pos")

    def __init__(self, probe: Probe, member: np.ndarray, cells: np.ndarray, dense: bool):
        self.probe, self.member, self.cells, self.dense = probe, member, cells, dense
        self._pos: np.ndarray | None = None

    def _positions(self) -> np.ndarray:
        """Where the context's values sit in the merged neighbourhood (ascending)."""
        if self._pos is None:
            self._pos = np.flatnonzero(self.member.take(self.probe.near.cells))
        return self._pos

    def around(self, count: int) -> tuple[float, float]:
        near = self.probe.near
        if self.dense:
            pos = self._positions()
            k = int(pos.searchsorted(near.below))  # the context's values < v here
            m = pos.size - int(pos.searchsorted(near.upto))  # ... and > v
            left = near.values[pos[k - count]] if k >= count else (-math.inf if near.lo == -math.inf else None)
            right = near.values[pos[pos.size - m + count - 1]] if m >= count else (
                math.inf if near.hi == math.inf else None)
            if left is not None and right is not None:
                return float(left), float(right)
        return self.probe.around(self.cells, count)

    def _covers(self, lo: float, hi: float) -> bool:
        near = self.probe.near
        return self.dense and near.lo <= lo and hi <= near.hi

    def between(self, lo: float, hi: float) -> np.ndarray:
        if self._covers(lo, hi):
            near, pos = self.probe.near, self._positions()
            i = pos.searchsorted(near.values.searchsorted(lo, side="left"))
            j = pos.searchsorted(near.values.searchsorted(hi, side="right"))
            return near.values[pos[i:j]]
        return self.probe.between(self.cells, lo, hi)

    def count(self, lo: float, hi: float, right_closed: bool) -> int:
        if self._covers(lo, hi):
            near, pos = self.probe.near, self._positions()
            i = pos.searchsorted(near.values.searchsorted(lo, side="left"))
            j = pos.searchsorted(near.values.searchsorted(hi, side="right" if right_closed else "left"))
            return max(0, int(j) - int(i))
        return self.probe.count(self.cells, lo, hi, right_closed)


def _ladder(runs: CellRuns, v: float, per_side: int) -> tuple[np.ndarray, np.ndarray]:
    """The rungs a (descending from v to −inf) and b (ascending from v to +inf), about
    `per_side` each: half at radii growing geometrically from span·2^−52 to the span (fine
    near v at every scale), half at the values a sample of the table ranks √2, 2, 2√2, ...
    places from v (fine in counts: an isolated v still finds rungs that hold a few dozen
    points). Any ladder is exact; this one keeps shells and windows small."""
    starts, values = runs.starts, runs.values
    lo = float(values[starts[:-1]].min()) if runs.n_cells else v  # a run's first value is its minimum
    hi = float(values[starts[1:] - 1].max()) if runs.n_cells else v
    span = max(v - lo, hi - v, 0.0)
    radii = span * np.exp2(np.linspace(-52.0, 0.0, per_side // 2)) if span > 0 and math.isfinite(span) else _EMPTY
    sample = runs.sample()
    below = int(sample.searchsorted(v, side="left"))
    above = int(sample.searchsorted(v, side="right"))
    steps = np.unique(np.round(np.sqrt(2.0) ** np.arange(per_side // 2)).astype(np.int64))
    left_q = sample[below - steps[steps <= below]]
    right_q = sample[above + steps[steps <= sample.size - above] - 1]
    with np.errstate(over="ignore"):
        a = np.concatenate(([v], v - radii, left_q, [-np.inf]))
        b = np.concatenate(([v], v + radii, right_q, [np.inf]))
    a = np.unique(np.minimum(a, v))[::-1]  # descending, v first (sample values are < v already)
    b = np.unique(np.maximum(b, v))
    return a, b


def _first_true(test: Callable[[int], bool], last: int, start: int) -> int:
    """The smallest j in 1..last with test(j), test monotone in j and taken as true at `last`;
    galloping from `start`, then bisecting."""
    lo, hi = 1, last  # the answer is in lo..hi
    j = min(max(start, lo), hi)
    step = 1
    if j == hi or test(j):
        hi = j
        while hi - step >= lo and test(hi - step):
            hi -= step
            step *= 2
        lo = max(lo, hi - step + 1)
    else:
        lo = j + 1
        while lo + step - 1 < hi and not test(lo + step - 1):
            lo += step
            step *= 2
        hi = min(hi, lo + step - 1)
    while lo < hi:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def gather_segments(values: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """values[begin[0]:end[0]] ++ values[begin[1]:end[1]] ++ ... (a copy), in O(len(begin) + output)."""
    lens = end - begin
    total = int(lens.sum())
    if total <= 0:
        return _EMPTY.copy()
    keep = lens > 0
    if not keep.all():
        begin, lens = begin[keep], lens[keep]
    if lens.size == 1:
        b = int(begin[0])
        return values[b : b + total].copy()
    offsets = np.cumsum(lens)
    offsets -= lens  # where each segment starts in the output
    index = np.repeat(begin - offsets, lens)
    index += np.arange(total)
    return values[index]


def _count_by_search(runs: CellRuns, cells: np.ndarray, lo: float, hi: float, right_closed: bool) -> int:
    total = 0
    for c in cells.tolist():
        run = runs.cell_values(c)
        a = run.searchsorted(lo, side="left")
        b = run.searchsorted(hi, side="right" if right_closed else "left")
        total += max(0, int(b) - int(a))
    return total


def _between_by_search(runs: CellRuns, cells: np.ndarray, lo: float, hi: float) -> np.ndarray:
    parts = []
    for c in cells.tolist():
        run = runs.cell_values(c)
        parts.append(run[run.searchsorted(lo, side="left") : run.searchsorted(hi, side="right")])
    if not parts:
        return _EMPTY.copy()
    out = np.concatenate(parts)
    out.sort()
    return out
