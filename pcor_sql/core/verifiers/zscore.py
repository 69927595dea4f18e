"""The z-score verifier: V is an outlier iff N ≥ 2, s > 0 and |v − mean|/s > z (s with ddof 1).

It reads moments only, so it has three equal forms: `ZScore.check` on a Population,
`zscore_check_many` over moment arrays, and `ZScore.sql`, a boolean SQL aggregate the engine
can evaluate inside DuckDB (DESIGN.md §2 "Verifiers": z-score is a pure SQL aggregate).

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pcor_sql.core.verifiers.capabilities import Capabilities, Reads
from pcor_sql.core.verifiers.base import Population, certificate, studentized_distance, studentized_distances
from pcor_sql.core.verifiers.verifier_options import fixed, store_real


def zscore_check_many(n: Any, mean: Any, m2: Any, v: Any, z: float) -> np.ndarray:
    """Z-score verdicts for many populations at once, from moment arrays (broadcast together)."""
    _, score = studentized_distances(n, mean, m2, v, 2)
    return score > z  # NaN (N < 2) compares False; s = 0 scores 0.0, never above z > 0


@dataclass(frozen=True)
class ZScore:
    """`zscore(z=3.0)`: |v − mean|/s > z; needs moments only; also renders itself as SQL."""

    z: float = 3.0
    name: str = fixed("zscore")
    capabilities: ClassVar[Capabilities] = Capabilities(Reads.MOMENTS, deterministic=True, label="z-score", vectorized=True)

    def __post_init__(self) -> None:
        store_real(self, "z", low=0.0, high=math.inf, low_closed=False, high_closed=False, example=3.0)

    def score(self, pop: Population) -> float:
        """|v − mean|/s; NaN when N < 2, 0.0 when s = 0 (a constant population)."""
        return studentized_distance(pop, 2)

    def check(self, pop: Population) -> bool:
        # NaN (N < 2) compares False; a constant population scores 0.0, never above z > 0.
        return studentized_distance(pop, 2) > self.z

    def certificate(self, pop: Population) -> dict[str, Any]:
        """|v − mean|/s against z, for the data owner (never released)."""
        return certificate("z", self.score(pop), self.z, "|v - mean| / s > z", pop)

    def check_many(self, n: Any, mean: Any, m2: Any, v: Any) -> np.ndarray:
        """Verdicts for many populations from moment arrays (see `zscore_check_many`)."""
        return zscore_check_many(n, mean, m2, v, self.z)

    def options(self) -> dict[str, Any]:
        return {"z": self.z}

    def sql(self, metric_sql: str, v_param: str) -> str:
        """A boolean aggregate over the population's rows, e.g. for `SELECT <this> FROM D_C`.

        `metric_sql` is the metric expression (already quoted by the engine) and `v_param` the
        placeholder or literal that carries V's value. stddev_samp is NULL for one row and the
        division is guarded by the `> 0` test, so the result is never NULL; z is a float literal
        written with repr (round-trips exactly) and cast to DOUBLE.
        """
        m, v = metric_sql, v_param
        z = f"CAST({self.z!r} AS DOUBLE)"
        return (
            f"(count({m}) >= 2 AND coalesce(stddev_samp({m}) > 0, false) AND "
            f"abs(({v}) - avg({m})) / stddev_samp({m}) > {z})"
        )

    def sql_expression(self, metric_sql: str, v_param: str) -> str:
        """The same as `sql` (the name the engine's SQL path calls)."""
        return self.sql(metric_sql, v_param)
