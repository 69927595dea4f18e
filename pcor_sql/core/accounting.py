"""Privacy accounting: the user's total ε → the per-call ε1 of each search (DESIGN.md §2).

| search                    | EM calls (worst case) | paper accounting | tight (monotone u) |
|---------------------------|-----------------------|------------------|--------------------|
| direct, uniform, rnd walk | 1                     | ε = 2ε1          | ε = ε1             |
| dfs, bfs                  | n + 1                 | ε = (2n+2)ε1     | ε = (n+1)ε1        |

Sequential composition of the EM calls (each 2ε1, or ε1 for monotone utilities; see
`mechanism`) gives these totals. Validity-only steps depend on COE(D, V) alone, which is the
same on OCDP neighbours, so they are free. `tight` is valid only for a monotone utility.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from pcor_sql.errors import UserError

SEARCHES = ("direct", "uniform", "random-walk", "dfs", "bfs")
ACCOUNTINGS = ("tight", "paper")


@dataclass(frozen=True)
class Budget:
    """The accounting of one release: total ε, per-call ε1, the rule, the worst-case call count."""

    epsilon: float
    epsilon1: float
    accounting: str
    max_em_calls: int
    cost_per_call: float


def validate_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool):
        raise UserError(f"epsilon must be a number, got {epsilon!r}", "pass e.g. --epsilon 0.2")
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise UserError(f"epsilon must be a number, got {epsilon!r}", "pass e.g. --epsilon 0.2") from None
    if math.isnan(eps) or math.isinf(eps) or eps <= 0:
        raise UserError(f"epsilon must be a finite number > 0, got {epsilon!r}", "pass e.g. --epsilon 0.2")
    return eps


def validate_samples(samples: int) -> int:
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples <= 0:
        raise UserError(f"samples must be a positive integer, got {samples!r}", "pass e.g. --samples 50")
    return int(samples)


def em_calls(search: str, samples: int) -> int:
    """Worst-case number of EM calls a search makes."""
    if search not in SEARCHES:
        raise UserError(f"unknown search {search!r}", f"use one of: {', '.join(SEARCHES)}")
    return samples + 1 if search in ("dfs", "bfs") else 1


def derive_budget(epsilon: float, search: str, samples: int, accounting: str, monotone: bool = True) -> Budget:
    """Split the total ε into ε1 for `search` under the `accounting` rule."""
    eps = validate_epsilon(epsilon)
    n = validate_samples(samples)
    if accounting not in ACCOUNTINGS:
        raise UserError(f"unknown accounting {accounting!r}", "use 'tight' or 'paper'")
    if accounting == "tight" and not monotone:
        raise UserError(
            "tight accounting needs a monotone utility",
            "use --accounting paper with this utility",
        )
    calls = em_calls(search, n)
    per_call_factor = 1.0 if accounting == "tight" else 2.0
    eps1 = eps / (per_call_factor * calls)
    return Budget(eps, eps1, accounting, calls, per_call_factor * eps1)


def spent(budget: Budget, calls_made: int) -> float:
    """ε actually consumed by `calls_made` EM calls (≤ budget.epsilon)."""
    return budget.cost_per_call * calls_made
