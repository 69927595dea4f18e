"""The verifier protocol and the population a verifier reads.

A verifier decides f(D_C, V): is V an outlier of the metric within population D_C? It reads
the population through `Population`, which the engine answers from the per-cell summary
(moments in microseconds, sorted values on demand) and the plain path answers from an array
fetched by the compiled WHERE. Both must give the same verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from pcor_sql.core.verifiers.capabilities import Capabilities


class Population(Protocol):
    """Metric values of one population D_C that contains V (value `v`); n ≥ 1."""

    n: int
    mean: float
    m2: float  # Σ (x − mean)², exactly 0.0 when min == max
    min: float
    max: float
    v: float

    def values(self) -> np.ndarray:
        """All n values, sorted ascending (may be expensive: prefer `between`)."""
        ...

    def between(self, lo: float, hi: float) -> np.ndarray:
        """Sorted values x with lo ≤ x ≤ hi."""
        ...

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        """Number of values in [lo, hi] (right_closed) or [lo, hi)."""
        ...

    def around(self, count: int) -> tuple[float, float]:
        """(a, b) with a ≤ v ≤ b such that [a, v) holds at least `count` values or a ≤ min,
        and (v, b] holds at least `count` values or b ≥ max. Any such pair is correct (a
        wider one costs only time); LOF sizes its first window with it."""
        ...


class Verifier(Protocol):
    """f(D_C, V). `capabilities` (a ClassVar, `core.verifiers.capabilities`) says what `check`
    reads of the population, whether the verdict is deterministic, and the verifier's label."""

    # Read-only: a built-in's is a frozen field, fixed to its label.
    @property
    def name(self) -> str: ...

    capabilities: ClassVar["Capabilities"]

    def check(self, pop: Population) -> bool: ...

    def options(self) -> dict[str, Any]: ...

    # Optional: `certificate(pop) -> dict` — the statistic and its threshold (`certificate`),
    # shown to the data owner with a release (`owner_view`); a verifier without it shows none.


class VectorizedVerifier(Verifier, Protocol):
    """A verifier whose capabilities say `vectorized`: verdicts of many populations at once from
    their moment arrays (`capabilities.Capabilities`)."""

    def check_many(self, n: Any, mean: Any, m2: Any, v: Any) -> np.ndarray: ...


class SqlReadingVerifier(Verifier, Protocol):
    """A verifier whose capabilities say it reads SQL: a boolean aggregate over the metric,
    with V as a parameter (`registry`'s SQL verifiers, `ZScore`)."""

    def sql_expression(self, metric_sql: str, v_param: str) -> str: ...


def certificate(statistic: str, value: float, threshold: float, rule: str, pop: Population) -> dict[str, Any]:
    """A verifier's statistic for V in one population, beside the threshold it was held to
    (`Verifier.certificate`): what lets the data owner believe a verdict without recomputing
    it. It reads the data, so it is the owner's alone: marked not for release."""
    return {"not_for_release": True, "statistic": statistic, "value": float(value), "threshold": float(threshold),
            "rule": rule, "population": int(pop.n)}


def studentized_distance(pop: Population, min_n: int) -> float:
    """|v − mean| / s with s the sample standard deviation (ddof 1): the statistic of both the
    z-score and Grubbs' test. NaN when N < min_n, 0.0 when s = 0 (a constant population)."""
    n = int(pop.n)
    if n < min_n:
        return math.nan
    s = math.sqrt(pop.m2 / (n - 1))
    if not s > 0:
        return 0.0
    return abs(pop.v - pop.mean) / s


def studentized_distances(n: Any, mean: Any, m2: Any, v: Any, min_n: int) -> tuple[np.ndarray, np.ndarray]:
    """`studentized_distance` over moment arrays (broadcast together): (N as int64, distances).
    A lane is NaN when N < min_n and 0.0 when s = 0, as in the scalar form."""
    n = np.asarray(n, dtype=np.int64)
    mean = np.asarray(mean, dtype=np.float64)
    m2 = np.asarray(m2, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    # N < min_n divides by 0 or a negative; those lanes are replaced below.
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sqrt(m2 / (n - 1))
        g = np.where(s > 0, np.abs(v - mean) / s, 0.0)
    return n, np.where(n >= min_n, g, np.nan)


@dataclass(frozen=True)
class ArrayPopulation:
    """A Population over an in-memory array: the reference and plain-path implementation."""

    sorted_values: np.ndarray
    v: float

    @classmethod
    def of(cls, values: Any, v: float) -> "ArrayPopulation":
        arr = np.sort(np.asarray(values, dtype=np.float64))
        return cls(arr, float(v))

    @property
    def n(self) -> int:
        return int(self.sorted_values.size)

    @property
    def mean(self) -> float:
        if self.min == self.max:
            return self.min
        return float(self.sorted_values.mean())

    @property
    def m2(self) -> float:
        if self.min == self.max:
            return 0.0
        d = self.sorted_values - self.sorted_values.mean()
        return float(d @ d)

    @property
    def min(self) -> float:
        return float(self.sorted_values[0])

    @property
    def max(self) -> float:
        return float(self.sorted_values[-1])

    def values(self) -> np.ndarray:
        return self.sorted_values

    def between(self, lo: float, hi: float) -> np.ndarray:
        a = np.searchsorted(self.sorted_values, lo, side="left")
        b = np.searchsorted(self.sorted_values, hi, side="right")
        return self.sorted_values[a:b]

    def count_between(self, lo: float, hi: float, right_closed: bool) -> int:
        a = np.searchsorted(self.sorted_values, lo, side="left")
        b = np.searchsorted(self.sorted_values, hi, side="right" if right_closed else "left")
        return int(max(0, b - a))

    def around(self, count: int) -> tuple[float, float]:
        w = self.sorted_values
        first = int(w.searchsorted(self.v, side="left"))
        past = int(w.searchsorted(self.v, side="right"))
        return float(w[max(first - count, 0)]), float(w[min(past + count, w.size) - 1])
