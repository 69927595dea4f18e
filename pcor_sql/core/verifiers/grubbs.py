"""Grubbs' test for one outlier (two-sided), exactly as DESIGN.md §2 defines it.

f(D_C, V) is true iff N ≥ 3, s = √(m2/(N−1)) > 0 and G = |v − mean|/s > G_crit(α, N) with
t = t.ppf(1 − α/(2N), N − 2) and G_crit = (N−1)/√N · √(t²/(N−2+t²)).

Only the moments (N, mean, m2) are read, so the engine can verify millions of contexts from
moment arrays with `grubbs_check_many`. The scalar path uses the same critical values (one
`t.ppf` per distinct (α, N), cached), so both paths give identical verdicts.

Privacy: a verifier releases nothing by itself; its verdicts only decide which contexts are
valid, which OCDP treats as public structure (DESIGN.md §2, "validity-only steps cost nothing").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from pcor_sql.core.verifiers.capabilities import Capabilities, Reads
from pcor_sql.core.verifiers.base import Population, certificate, studentized_distance, studentized_distances
from pcor_sql.core.verifiers.verifier_options import fixed, store_real


def grubbs_critical(alpha: float, n_array: Any) -> np.ndarray:
    """G_crit(α, N) for each N in `n_array` (NaN where N < 3); one t.ppf per distinct N."""
    from scipy import special  # here, not at import: the CLI's help lists the verifiers without scipy

    n = np.asarray(n_array)
    if n.size and not np.issubdtype(n.dtype, np.integer):
        raise TypeError("grubbs_critical needs integer population sizes")
    n = n.astype(np.int64, copy=False)
    uniq, inverse = np.unique(n, return_inverse=True)
    crit = np.full(uniq.shape, np.nan)
    ok = uniq >= 3
    un = uniq[ok].astype(np.float64)
    # special.stdtrit(df, p) is what stats.t.ppf evaluates, without its ~60 µs argument checks.
    t = special.stdtrit(un - 2.0, 1.0 - alpha / (2.0 * un))
    t2 = t * t
    crit[ok] = (un - 1.0) / np.sqrt(un) * np.sqrt(t2 / (un - 2.0 + t2))
    return crit[inverse].reshape(n.shape)


@lru_cache(maxsize=1 << 16)
def grubbs_critical_one(alpha: float, n: int) -> float:
    """G_crit(α, N) for one N: the same operations as `grubbs_critical` in the same order, on
    Python floats. stdtrit is one C function per element and +, −, ×, ÷, √ are correctly
    rounded, so both paths agree; this one skips np.unique and array set-up, which cost ~18 µs
    a call (`python -m benchmarks per-check`: most of a Grubbs check, since a search's contexts rarely share an N)."""
    from scipy import special

    n = int(n)
    if n < 3:
        return math.nan
    un = float(n)
    t = float(special.stdtrit(un - 2.0, 1.0 - alpha / (2.0 * un)))
    t2 = t * t
    return (un - 1.0) / math.sqrt(un) * math.sqrt(t2 / (un - 2.0 + t2))


def grubbs_check_many(n: Any, mean: Any, m2: Any, v: Any, alpha: float) -> np.ndarray:
    """Grubbs verdicts for many populations at once, from moment arrays (broadcast together)."""
    n, g = studentized_distances(n, mean, m2, v, 3)
    # NaN (N < 3) and 0.0 (s = 0) lanes are never outliers: the critical value is positive.
    return (g > 0) & (g > grubbs_critical(alpha, n))


@dataclass(frozen=True)
class Grubbs:
    """`grubbs(alpha=0.05)`: two-sided Grubbs test at level alpha; needs moments only."""

    alpha: float = 0.05
    name: str = fixed("grubbs")
    capabilities: ClassVar[Capabilities] = Capabilities(
        Reads.MOMENTS, deterministic=True, label="Grubbs' test", vectorized=True)

    def __post_init__(self) -> None:
        store_real(self, "alpha", low=0.0, high=1.0, low_closed=False, high_closed=False, example=0.05)

    def score(self, pop: Population) -> float:
        """G = |v − mean|/s; NaN when N < 3, 0.0 when s = 0 (a constant population)."""
        return studentized_distance(pop, 3)

    def check(self, pop: Population) -> bool:
        g = studentized_distance(pop, 3)
        # NaN (N < 3) and 0.0 (s = 0) are never outliers; only then is the critical value needed.
        return g > 0 and g > grubbs_critical_one(self.alpha, int(pop.n))

    def certificate(self, pop: Population) -> dict[str, Any]:
        """G against G_crit(α, N), for the data owner (never released)."""
        return certificate("G", self.score(pop), grubbs_critical_one(self.alpha, int(pop.n)), "G > G_crit(alpha, N)", pop)

    def check_many(self, n: Any, mean: Any, m2: Any, v: Any) -> np.ndarray:
        """Verdicts for many populations from moment arrays (see `grubbs_check_many`)."""
        return grubbs_check_many(n, mean, m2, v, self.alpha)

    def options(self) -> dict[str, Any]:
        return {"alpha": self.alpha}
