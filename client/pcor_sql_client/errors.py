"""The errors of pcor-sql that an analyst's client can meet: bad input (`UserError`: the problem,
then the fix), a refusal by the trust model (`Refused`), a limit or quota reached
(`BudgetExceeded`), a request that failed after it was charged (`RequestFailed`).

`pcor_sql.errors` re-exports these very classes: one definition, so the full package and the
light client raise and catch the same exceptions.
"""

from __future__ import annotations


class PcorError(Exception):
    """Base class of every error pcor-sql raises on purpose."""


class UserError(PcorError):
    """Bad input. The message is one line: the problem, then the fix."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem} — {fix}")


class BudgetExceeded(UserError):
    """A release would exceed the privacy budget limit set for a dataset."""


class Refused(UserError):
    """A request the trust model refuses (DESIGN.md §6): an analyst asking for an owner's
    option, a seed on a persistent ledger, a unit without a limit in a strict ledger."""


class RequestFailed(Refused):
    """An analyst's request failed after its cost was reserved. The message is the same
    whatever the data holds (a missing key, a NULL metric, a conversion error, no valid
    context, …), and the charge stands: a failure that depended on the rows would otherwise
    tell the analyst about them for free."""
