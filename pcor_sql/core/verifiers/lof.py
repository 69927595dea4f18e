"""The local outlier factor verifier (Breunig et al. 2000) on a 1-D metric, DESIGN.md §2 exactly.

Two rules for duplicates (`lof(duplicates=...)`), over N points, V one of them, distances
|p − o| in doubles:

- `distinct` (the default; Breunig et al.'s own rule for duplicates). D = the number of
  distinct values, k' = min(k, D − 1):
    k-distance(p) = the distance from p to its k'-th nearest distinct value among the OTHER
      points' values (values equal to p's own are not counted);
    N_k(p) = every other point within k-distance(p), ties and p's own copies included;
    reach(p, o) = max(k-distance(o), |p − o|);   lrd(p) = 1 / (mean over o ∈ N_k(p) of reach(p, o));
    LOF(V) = mean over o ∈ N_k(V) of lrd(o) / lrd(V);   outlier iff LOF(V) > threshold.
  Defined for N ≥ 2 and D ≥ 2 (NaN, never an outlier, otherwise). Every k-distance is a
  distance between two unequal doubles, so > 0, and no guard is needed.
- `plain` (the plain k-distance). k' = min(k, N − 1); k-distance(p) = the k'-th smallest
  distance from p to the other points (with multiplicity: p's own copies count); N_k and reach
  as above (every point within the k-distance, ties kept); lrd(p) = 1 / (mean reach + 1e-10);
  a constant population has LOF 1.
Without ties the two rules are the same and equal scikit-learn's `-negative_outlier_factor_`.
With ties scikit-learn differs from both: it takes exactly k neighbours, breaking ties at the
k-distance arbitrarily, where N_k here keeps every tie — so neither rule is scikit-learn's.
Why the default is `distinct`: real metrics are full of duplicates (rounded, top-coded,
minimum wages); under `plain` a point next to a block of ≥ k' equal values has neighbours
with lrd ≈ 1e10 and LOF ≈ 1e9 (`python -m benchmarks verifiers` measures the share of rows
each rule flags; BENCHMARKS.md).

How it is computed without touching all N values (both rules).
  Every quantity depends on a point only through its value, so the work is on distinct values
  with multiplicities (`lof_band`). LOF(V) reads the k-distance of V, of its neighbours
  o ∈ N_k(V) and of their neighbours q ∈ N_k(o). The code fetches a window W = [a, b] ∋ v of
  the population, computes everything inside W and accepts the result only when it provably
  equals the global one: for every point q whose k-distance it used, the distance from q to
  the nearest double outside the window exceeds kdist_W(q) (on each side where the window
  does not already reach pop.min / pop.max). Then all points within kdist_W(q) of q are in W
  — under either rule the k' nearest points or distinct values of q are then W's, so
  kdist_P(q) = kdist_W(q), and N_k(q) is the same set with the same counts (W holds every
  copy of its values) — by induction from V outwards, every number used is the global one.
  Distances are monotone in the other point, so checking the first double beyond the window
  covers every point beyond it. The proof holds for any window, so the result does not
  depend on which window proved it. Otherwise the window grows — at least twice the points per
  side, and at least the reach the proof asked for — and the check repeats; once it is
  [min, max] the window is the population and the check passes.
  The first window is pop.around(2H + k'): the values holding 2H + k' points on each side of
  v (H = k'+1), enough for the band of ±2H distinct values and the k' more its k-distances
  read when there are no ties — the fast path. It is sized by point counts, not by a radius,
  so an isolated V (a far outlier) does not drag the dense bulk into its window. The distinct
  rule needs 2H + k' distinct values per side: counted in rows it asks a quarter more, and a
  window still short of them grows (by twice the ratio it lacks) before any arithmetic.
  Plain-rule shortcut: when v itself has more than k' copies, kdist(V) = 0, N_k(V) is V's
  copies, all of whose k-distances are 0, and LOF(V) = 1 exactly (read off the window's run
  lengths, or from one count when the window is big, so many copies are never scanned). The
  distinct rule has no such shortcut: V's copies never make its k-distance 0.
  Distinct rule, k': D is unknown until a window covers the population; a window holding
  k + 1 distinct values proves D − 1 ≥ k, so k' = k is used until then (a population with
  D ≤ k can prove nothing earlier: some k-distance would need values the window lacks, so
  the window grows to the population, where k' = min(k, D − 1) is exact).
  A Population may offer `distinct_between(lo, hi) -> (values, counts)` (the distinct values
  in [lo, hi], ascending, with their multiplicities) and `distinct_around(count)` (`around`
  counted in distinct values): the distinct rule then reads and sizes windows by distinct
  values instead of rows — the per-cell windows of `engine/window.py` hold (value, count)
  pairs, and the sorted runs of a tie-heavy metric keep a value × cell count matrix
  (`engine/value_counts.py`), so a value's copies are never gathered one by one.
  Values must span less than ~4.5e307 (a UserError otherwise) so that no distance overflows.

Measured (k = 20, N = 50,000, V drawn from the population, one ArrayPopulation check, median
  of best-of-3, numpy 2.4, 2 cores at load 5–9; python -m tests.core.verifiers.bench_lof):
    normal / uniform values: distinct 77 µs, plain 74 µs — the same work without ties;
    salaries rounded to 100 / integers 0..99: distinct 126 / 179 µs (a real LOF over the
    distinct values near V, the whole column for 0..99), plain 19 / 11 µs (mostly its
    shortcut: V has > k' copies, LOF = 1).
  Shares of rows each rule flags: python -m benchmarks verifiers (BENCHMARKS.md).

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, NamedTuple

from pcor_sql.core.verifiers.capabilities import Capabilities, Reads
from pcor_sql.core.verifiers.base import Population, certificate
from pcor_sql.core.verifiers.lof_band import FAR, Grow, Widen, distinct_runs, distinct_window_lof, plain_window_lof
from pcor_sql.core.verifiers.verifier_options import fixed, one_of, real_number, whole_number
from pcor_sql.errors import InternalError, UserError

DISTINCT = "distinct"
PLAIN = "plain"
DUPLICATE_RULES = (DISTINCT, PLAIN)


def local_outlier_factor(pop: Population, k: int, duplicates: str = DISTINCT) -> float:
    """LOF(V) within the population (DESIGN.md §2) under the rule `duplicates`; NaN when N < 2
    (and, for the distinct rule, when the population has a single distinct value)."""
    n = int(pop.n)
    if n < 2:
        return math.nan
    v, lo, hi = float(pop.v), float(pop.min), float(pop.max)
    if lo == hi:
        # A constant population: under the plain rule every lrd is 1/1e-10 and LOF(V) = 1;
        # under the distinct rule no point has another distinct value, so LOF is undefined.
        return 1.0 if duplicates == PLAIN else math.nan
    if not hi - lo < FAR / 4:
        raise UserError(
            f"the metric spans [{lo!r}, {hi!r}], too wide for LOF's distance arithmetic",
            "rescale the metric (e.g. divide it by a power of ten)",
        )
    if duplicates == PLAIN:
        return _plain(pop, min(k, n - 1), v, lo, hi)
    if duplicates == DISTINCT:
        return _distinct(pop, k, v, lo, hi)
    raise InternalError(f"unknown LOF duplicates rule {duplicates!r}")


def _plain(pop: Population, kk: int, v: float, lo: float, hi: float) -> float:
    h = kk + 1

    def window_lof(a: float, b: float, h: int, left_done: bool, right_done: bool) -> float | Grow | Widen:
        w = pop.between(a, b)
        if w.size > 16 * h and pop.count_between(v, v, True) > kk:
            # A big window, maybe of V's own copies: if there are more than k' of them,
            # LOF(V) = 1 exactly (see plain_window_lof) — one count instead of a scan.
            return 1.0
        return plain_window_lof(w, v, kk, h, *_outside(a, b, left_done, right_done))

    # Points per side: the band's 2H distinct values and the k' beyond them its k-distances read.
    return _proven(pop.around, v, lo, hi, 2 * h + kk, h, window_lof)


def _distinct(pop: Population, k: int, v: float, lo: float, hi: float) -> float:
    h = k + 1
    around = getattr(pop, "distinct_around", None)
    # Per side: 2H + k' distinct values. Counted in rows (no `distinct_around`), a quarter more:
    # a few ties near V would otherwise leave the first window a value or two short.
    count = 2 * h + k if around is not None else (5 * (2 * h + k)) // 4
    runs_between = getattr(pop, "distinct_between", None)

    def window_lof(a: float, b: float, h: int, left_done: bool, right_done: bool) -> float | Grow | Widen | _Short:
        ud, cd = runs_between(a, b) if runs_between is not None else distinct_runs(pop.between(a, b))
        # The window is the population: k' = min(k, D − 1), D ≥ 2 here.
        kk = min(k, ud.size - 1) if left_done and right_done else k
        need = 2 * h + kk  # distinct values per side the band and its k-distances read
        jv = int(ud.searchsorted(v))
        short = max(0 if left_done else need - jv, 0 if right_done else need - (ud.size - 1 - jv))
        if short > 0:
            return _Short(need, max(1, need - short))
        return distinct_window_lof(ud, cd, v, kk, h, *_outside(a, b, left_done, right_done))

    return _proven(around or pop.around, v, lo, hi, count, h, window_lof)


class _Short(NamedTuple):
    """Too few distinct values on a side to prove anything: `need` per side, `have` at most."""

    need: int
    have: int


def _proven(around: Callable[[int], tuple[float, float]], v: float, lo: float, hi: float, count: int, h: int,
            window_lof: Callable[[float, float, int, bool, bool], float | Grow | Widen | _Short]) -> float:
    """LOF(V) from the first window [a, b] (`count` points per side, cut to the population's
    [lo, hi]) on which `window_lof` proves it: a wider band (H doubled) when ties ask for one,
    else a window grown by the count and the reach the failed proof asked for."""
    a, b = around(count)
    while True:
        left_done, right_done = a <= lo, b >= hi
        if left_done:
            a = lo
        if right_done:
            b = hi
        result = window_lof(a, b, h, left_done, right_done)
        if isinstance(result, float):
            return result
        if isinstance(result, Widen):
            h *= 2
            continue
        if isinstance(result, _Short):
            # Grow by twice the ratio lacking (copies per value vary; one round too few costs
            # a whole window).
            count = 2 * max(count, -(-count * result.need // result.have))
            a, b = _grown(around, a, b, v, count, 0.0)
            continue
        if left_done and right_done:
            raise InternalError("LOF over the whole population was not proven")
        count *= 2
        a, b = _grown(around, a, b, v, count, result.radius)


def _outside(a: float, b: float, left_done: bool, right_done: bool) -> tuple[float, float]:
    """The nearest doubles just outside [a, b], or ±inf on a side the window holds whole."""
    return (-math.inf if left_done else math.nextafter(a, -math.inf),
            math.inf if right_done else math.nextafter(b, math.inf))


def _grown(around: Callable[[int], tuple[float, float]], a: float, b: float, v: float, count: int,
           radius: float) -> tuple[float, float]:
    """The next window: `count` points (or distinct values) per side, and at least the reach the
    failed proof asked for (an infinite hint only says "more points": the count gives them). The
    count at least doubles each round, so by ~log2(N) rounds the window is the population and
    the proof passes."""
    a2, b2 = around(count)
    reach = radius if math.isfinite(radius) else 0.0
    return min(a, a2, v - reach), max(b, b2, v + reach)


@dataclass(frozen=True)
class Lof:
    """`lof(k=20, threshold=1.5)`: outlier iff LOF(V) > threshold among the population, with
    Breunig et al.'s rule for duplicates; `lof(..., duplicates='plain')`: the plain k-distance
    (equal to scikit-learn's only on data without ties)."""

    k: int = 20
    threshold: float = 1.5
    duplicates: str = DISTINCT
    name: str = fixed("lof")
    capabilities: ClassVar[Capabilities] = Capabilities(Reads.NEAR, deterministic=True, label="LOF")

    def __post_init__(self) -> None:
        k = whole_number("lof", "k", self.k, minimum=1, example=20)
        # LOF ≈ 1 means "as dense as the neighbours"; a threshold below 1 would flag inliers
        # (a constant population has LOF exactly 1 under the plain rule).
        threshold = real_number(
            "lof", "threshold", self.threshold,
            low=1.0, high=math.inf, low_closed=True, high_closed=False, example=1.5,
        )
        duplicates = one_of("lof", "duplicates", self.duplicates, DUPLICATE_RULES)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "threshold", threshold)
        object.__setattr__(self, "duplicates", duplicates)

    def score(self, pop: Population) -> float:
        """LOF(V); NaN when N < 2 (or, distinct rule, a single distinct value)."""
        return local_outlier_factor(pop, self.k, self.duplicates)

    def check(self, pop: Population) -> bool:
        if int(pop.n) < 2:
            return False
        return local_outlier_factor(pop, self.k, self.duplicates) > self.threshold  # NaN: False

    def certificate(self, pop: Population) -> dict[str, Any]:
        """The statistic behind the verdict, for the data owner (never released)."""
        return certificate("LOF", self.score(pop), self.threshold, "LOF > threshold", pop)

    def options(self) -> dict[str, Any]:
        """The options as `lof(...)` text shows them: `duplicates` only when it is not the
        default, so `lof(k=20, threshold=1.5)` reads as DESIGN.md §2 defines it."""
        out: dict[str, Any] = {"k": self.k, "threshold": self.threshold}
        if self.duplicates != DISTINCT:
            out["duplicates"] = self.duplicates
        return out
