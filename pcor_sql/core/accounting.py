"""Privacy accounting: the user's total ε → the per-call ε1 of each search (DESIGN.md §2).

| search                    | EM calls (worst case) | paper accounting | tight (monotone u) |
|---------------------------|-----------------------|------------------|--------------------|
| direct, uniform, rnd walk | 1                     | ε = 2ε1          | ε = ε1             |
| explore (any n)           | 1                     | ε = 2ε1          | ε = ε1             |
| dfs, bfs                  | n + 1                 | ε = (2n+2)ε1     | ε = (n+1)ε1        |

Sequential composition of the EM calls (each 2ε1, or ε1 for monotone utilities; see
`mechanism`) gives these totals. Validity-only steps depend on COE(D, V) alone, which is the
same on OCDP neighbours, so they are free. `tight` is valid only for a monotone utility.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Union

from pcor_sql.core.search_specs import SEARCH_SPECS, search_spec

from pcor_sql.errors import UserError, option_hint

SEARCHES = tuple(SEARCH_SPECS)


@dataclass(frozen=True)
class AccountingRule:
    """What one EM call of ε1 costs under a rule: `factor`·ε1 (DESIGN.md §2). `tight` (factor 1)
    holds only for a monotone utility, whose sensitivity is one-sided; `paper` (factor 2) always."""

    name: str
    factor: float
    needs_monotone: bool


ACCOUNTING_RULES = {
    rule.name: rule for rule in (AccountingRule("tight", 1.0, True), AccountingRule("paper", 2.0, False))
}
ACCOUNTINGS = tuple(ACCOUNTING_RULES)


@dataclass(frozen=True)
class Budget:
    """The accounting of one release: total ε, per-call ε1, the rule, the worst-case call count."""

    epsilon: float
    epsilon1: float
    accounting: str
    max_em_calls: int
    cost_per_call: float

    @property
    def cost(self) -> "OcdpCost":
        return OcdpCost(self.epsilon)


@dataclass(frozen=True)
class OcdpCost:
    """ε of an output-constrained DP release (PCOR): neighbours share COE(D, V)."""

    epsilon: float
    notion = "ocdp"


@dataclass(frozen=True)
class DpCost:
    """ε of an ε-differentially private answer (any two neighbouring datasets)."""

    epsilon: float
    notion = "dp"


@dataclass(frozen=True)
class SpCost:
    """ε of an (ε, k)-sensitively private answer: the guarantee depends on k as well."""

    epsilon: float
    k: int
    notion = "sp"


#: A privacy cost. The three notions hold under different neighbour relations, so costs of
#: different notions must never be added into one number (DESIGN.md §6); the ledger keeps
#: them apart by `notion`.
Cost = Union[OcdpCost, DpCost, SpCost]


def validate_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool):
        raise UserError(f"epsilon must be a number, got {epsilon!r}", f"pass e.g. {option_hint('epsilon', '0.2')}")
    try:
        eps = float(epsilon)
    except OverflowError:
        raise UserError(f"epsilon is too large to be a privacy cost, got {epsilon!r}",
                        f"pass e.g. {option_hint('epsilon', '0.2')}") from None
    except (TypeError, ValueError):
        raise UserError(f"epsilon must be a number, got {epsilon!r}", f"pass e.g. {option_hint('epsilon', '0.2')}") from None
    if math.isnan(eps) or math.isinf(eps) or eps <= 0:
        raise UserError(f"epsilon must be a finite number > 0, got {epsilon!r}", f"pass e.g. {option_hint('epsilon', '0.2')}")
    return eps


def validate_samples(samples: int) -> int:
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples <= 0:
        raise UserError(f"samples must be a positive integer, got {samples!r}", f"pass e.g. {option_hint('samples', '50')}")
    return int(samples)


def em_calls(search: str, samples: int) -> int:
    """Worst-case number of EM calls a search makes (its declared privacy map)."""
    return search_spec(search).worst_case_em_calls(samples)


def derive_budget(epsilon: float, search: str, samples: int, accounting: str, monotone: bool = True) -> Budget:
    """Split the total ε into ε1 for `search` under the `accounting` rule: ε = calls · factor · ε1."""
    eps = validate_epsilon(epsilon)
    n = validate_samples(samples)
    rule = ACCOUNTING_RULES.get(accounting) if isinstance(accounting, str) else None
    if rule is None:
        raise UserError(f"unknown accounting {accounting!r}", "use 'tight' or 'paper'")
    if rule.needs_monotone and not monotone:
        raise UserError(
            "tight accounting needs a monotone utility",
            f"use {option_hint('accounting', 'paper')} with this utility",
        )
    calls = em_calls(search, n)
    eps1 = eps / (rule.factor * calls)
    return Budget(eps, eps1, rule.name, calls, rule.factor * eps1)


def spent(budget: Budget, calls_made: int) -> float:
    """ε actually consumed by `calls_made` EM calls (≤ budget.epsilon)."""
    return budget.cost_per_call * calls_made
