"""The exponential mechanism (McSherry & Talwar 2007), sampled in log space.

EM_ε1(S): pick c ∈ S with probability exp(ε1·u(c)/Δu) / Σ_{c'∈S} exp(ε1·u(c')/Δu).

Privacy map (under OCDP: neighbouring D, D' have the same candidate set S):
  General utility, |u(c,D) − u(c,D')| ≤ Δu. Pr[c|D]/Pr[c|D'] =
  exp(ε1(u(c,D) − u(c,D'))/Δu) · Σ exp(ε1 u(c',D')/Δu) / Σ exp(ε1 u(c',D)/Δu)
  ≤ e^{ε1} · e^{ε1} = e^{2ε1}  (paper, Thm 4.1).
  Monotone utility (adding a row never lowers any u): for D' = D + row every u moves up by
  between 0 and Δu, so the numerator factor is ≤ 1 when the denominator factor is ≤ e^{ε1}
  and vice versa: only one of the two can exceed 1, and the ratio is ≤ e^{ε1}
  (Dwork & Roth 2014, §3.4). `population` and `overlap` are monotone.

Sampling: Gumbel-max — argmax_c (ε1·u(c)/Δu + G_c), G_c = −log(−log U_c) i.i.d. standard
Gumbel — has exactly the EM law and never exponentiates raw utilities, so utilities of any
size are safe. Candidates may repeat (a multiset): a repeated context gets its weight once
per occurrence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pcor_sql.core.randomness import Source, uniform_open
from pcor_sql.errors import InternalError


def em_cost(epsilon1: float, monotone: bool) -> float:
    """Privacy cost of one EM call: ε1 for a monotone utility, 2ε1 in general."""
    return epsilon1 if monotone else 2.0 * epsilon1


def em_probabilities(utilities: Sequence[float], epsilon1: float, sensitivity: float = 1.0) -> np.ndarray:
    """The exact EM law over the candidates, computed stably (for tests and audits)."""
    u = np.asarray(utilities, dtype=np.float64)
    if u.size == 0:
        raise InternalError("exponential mechanism over an empty candidate set")
    if math.isinf(epsilon1):
        best = u == u.max()
        return best / best.sum()
    logits = epsilon1 * u / sensitivity
    logits -= logits.max()
    w = np.exp(logits)
    return w / w.sum()


def exponential_mechanism(
    utilities: Sequence[float], epsilon1: float, source: Source, sensitivity: float = 1.0
) -> int:
    """Index of the candidate chosen by EM_ε1 (Gumbel-max). Cost: see `em_cost`."""
    u = np.asarray(utilities, dtype=np.float64)
    if u.size == 0:
        raise InternalError("exponential mechanism over an empty candidate set")
    if not epsilon1 > 0 or not sensitivity > 0:
        raise InternalError(f"EM needs ε1 > 0 and Δu > 0, got {epsilon1}, {sensitivity}")
    if u.size == 1:
        # One candidate: the law is a point mass; no draw is needed (and none leaks anything).
        return 0
    gumbel = -np.log(-np.log(uniform_open(source, u.size)))
    if math.isinf(epsilon1):
        # ε1 = ∞ is argmax with uniform tie-breaking (the limit law), for edge-case tests.
        best = np.flatnonzero(u == u.max())
        return int(best[np.argmax(gumbel[best])])
    return int(np.argmax(epsilon1 * u / sensitivity + gumbel))


@dataclass(frozen=True)
class EMCall:
    """One EM call of a search, as recorded in its trace."""

    step: str
    candidates: int
