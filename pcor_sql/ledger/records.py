"""What the ledger hands back: a unit's budget per notion, a charged release, a limit change."""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass

from pcor_sql.ledger.input_checks import NOTIONS


@dataclass(frozen=True)
class BudgetStatus:
    """The budget of one unit under one privacy notion. `limit` is the unit's own limit, else
    the notion's default limit (`limit_source` says which: "own", "default", or None when
    neither is set); `remaining` is None without a limit. A public unit is never charged."""

    unit: str
    notion: str
    limit: float | None
    limit_source: str | None
    spent: float
    remaining: float | None
    releases: int
    public: bool = False

    @property
    def dataset(self) -> str:  # the name before units existed
        return self.unit


@dataclass(frozen=True)
class ReleaseRecord:
    """One release as charged to one unit. `seq` numbers the unit's charges of that notion from
    1; `released_at` is UTC; `spent_after` is the unit's total once this release was charged;
    `seeded` marks a run whose output was a deterministic function of the data (not private).
    `analyst`: the named analyst who asked; `outcome`: 'running', 'answered', 'failed' (with a
    `reason` class), 'interrupted', or 'charged' (a charge that records no outcome);
    `refunded`: the ε was given back (an owner's failure or interrupt: not charged)."""

    release_id: str
    unit: str
    notion: str
    seq: int
    released_at: _dt.datetime
    mechanism: str
    epsilon: float
    k: int | None
    record_key: str | None
    statement: str | None
    spent_after: float
    seeded: bool
    role: str
    dataset: str | None
    analyst: str | None = None
    outcome: str = "charged"
    reason: str | None = None
    refunded: bool = False

    @property
    def shown_outcome(self) -> str:
        """The outcome in words: 'failed: data (not charged)', 'interrupted', ..."""
        text = self.outcome + (f": {self.reason}" if self.reason and self.outcome == "failed" else "")
        return text + (" (not charged)" if self.refunded else "")


@dataclass(frozen=True)
class LimitChange:
    """The result of setting a limit. `below_spent` is True when the new limit is below the ε
    already spent: allowed (the owner may tighten a budget), but nothing fits until it is raised."""

    unit: str
    notion: str
    limit: float | None
    previous_limit: float | None
    spent: float
    below_spent: bool


def new_release_id() -> str:
    """A fresh release id (random, 128 bits). Make it before computing a release and pass the same
    id to every charge of that release, so a retried charge is not charged twice."""
    return os.urandom(16).hex()


def budget_status(
    unit: str, notion: str, own: float | None, default: float | None, spent: float, releases: int, public: bool
) -> BudgetStatus:
    limit = own if own is not None else default
    source = "own" if own is not None else ("default" if default is not None else None)
    remaining = None if limit is None else max(0.0, limit - spent)
    return BudgetStatus(unit, notion, limit, source, spent, remaining, releases, public)


HISTORY_COLUMNS = (
    "release_id, unit, notion, seq, released_at, mechanism, epsilon, k, record_key, statement, spent_after,"
    " seeded, role, dataset, analyst, outcome, reason, refunded"
)
