"""Error and warning types. User errors say what is wrong and how to fix it; internal ones say
"probably a bug"; a PrivacyWarning says that an output or a ledger protects less than it seems."""

from __future__ import annotations

import warnings
from typing import Callable


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


class NoValidContext(UserError):
    """The record is an outlier in no context the search could reach."""


class Refused(UserError):
    """A request the trust model refuses (DESIGN.md §6): an analyst asking for an owner's
    option, a seed on a persistent ledger, a unit without a limit in a strict ledger."""


class RequestFailed(Refused):
    """An analyst's request failed after its cost was reserved. The message is the same
    whatever the data holds (a missing key, a NULL metric, a conversion error, no valid
    context, …), and the charge stands: a failure that depended on the rows would otherwise
    tell the analyst about them for free."""


class PrivacyWarning(UserWarning):
    """An output or a ledger protects less than it may seem to: domains derived from the data
    (their values are released as they are), a seeded run (a deterministic function of the
    data, not private), a ledger kept in memory (forgotten when the process ends)."""


def warn_privacy(message: str, warn: Callable[[str], None] | None = None, *, stacklevel: int = 3) -> None:
    """Send a privacy warning to `warn` if the caller gave one (the CLI prints it on stderr),
    else through `warnings.warn(..., PrivacyWarning)` so that every Python caller sees it."""
    if warn is not None:
        warn(message)
    else:
        warnings.warn(message, PrivacyWarning, stacklevel=stacklevel)


class InternalError(PcorError):
    """An invariant failed inside pcor-sql."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(f"{message} (this is probably a bug in pcor-sql; please report it)")


def require(condition: bool, message: str) -> None:
    """Check an internal invariant."""
    if not condition:
        raise InternalError(message)
