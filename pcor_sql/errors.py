"""Error types. User errors say what is wrong and how to fix it; internal ones say "probably a bug"."""

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


class NoValidContext(UserError):
    """The record is an outlier in no context the search could reach."""


class InternalError(PcorError):
    """An invariant failed inside pcor-sql."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(f"{message} (this is probably a bug in pcor-sql; please report it)")


def require(condition: bool, message: str) -> None:
    """Check an internal invariant."""
    if not condition:
        raise InternalError(message)
