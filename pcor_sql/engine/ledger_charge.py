"""The ledger's records, and the body of a charge: read the budget, check the limit, write history and total — the SQL of
one ledger transaction, and the arithmetic and refusal messages around it.

A charge is one transaction of five statements in the steady state: BEGIN, one SELECT of the
dataset's budget row and of any release ids already charged, one INSERT of the history rows,
one upsert of the budget row, COMMIT. `Ledger.open_charge` issues the first two before the
caller's work (the early refusal) and the rest after it, so the check and the write are one
transaction; if another writer committed to the same row meanwhile, DuckDB refuses our write
and the whole body runs again from a fresh snapshot, re-checking the limit.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

import duckdb

from pcor_sql.core.accounting import Cost
from pcor_sql.errors import BudgetExceeded, InternalError, UserError

#: Float slack when comparing spent + ε with a limit: releases of ε = 0.1 and 0.2 must fit a
#: limit of 0.3 although 0.1 + 0.2 is 0.30000000000000004 in floats.
TOLERANCE = 1e-12


@dataclass(frozen=True)
class ChargeItem:
    """One release to charge: its id (chosen before the release is computed), its typed cost,
    the mechanism that made it, and what it was about (see `Ledger.charge_many`)."""

    release_id: str
    cost: Cost
    mechanism: str
    record_key: str | None = None
    statement: str | None = None

    @property
    def epsilon(self) -> float:
        return float(self.cost.epsilon)


@dataclass(frozen=True)
class BudgetRow:
    """A dataset's budget row as one transaction read it (a dataset never charged: zeros)."""

    exists: bool
    limit: float | None
    spent: float
    residual: float
    releases: int
    seen: dict[str, tuple[str, float]]


@dataclass(frozen=True)
class Tables:
    """The ledger's two tables, as qualified SQL names."""

    budget: str
    history: str


def read_budget(cur: duckdb.DuckDBPyConnection, tables: Tables, dataset: str, ids: list[str]) -> BudgetRow:
    """The budget row of `dataset` and, among `ids`, those already in the history — one SELECT."""
    rows = cur.execute(
        f"SELECT b.dataset IS NOT NULL, b.limit_epsilon, coalesce(b.spent_epsilon, 0), coalesce(b.spent_residual, 0),"
        f" coalesce(b.releases, 0), (SELECT list((h.release_id, h.dataset, h.epsilon)) FROM {tables.history} h"
        f" WHERE h.release_id IN (SELECT unnest($2::VARCHAR[])))"
        f" FROM (SELECT 1) AS one LEFT JOIN {tables.budget} b ON b.dataset = $1",
        [dataset, ids],
    ).fetchall()
    exists, limit, spent, residual, releases, seen = rows[0]
    found = {}
    for entry in seen or []:
        rid, owner, eps = entry.values() if isinstance(entry, dict) else entry
        found[rid] = (owner, eps)
    return BudgetRow(bool(exists), limit, spent, residual, releases, found)


def fresh_items(row: BudgetRow, dataset: str, batch: tuple[ChargeItem, ...]) -> list[ChargeItem]:
    """The items not charged before; an id charged before with another ε or dataset is a bug."""
    fresh = []
    for item in batch:
        if item.release_id not in row.seen:
            fresh.append(item)
        elif row.seen[item.release_id] != (dataset, item.epsilon):
            owner, eps = row.seen[item.release_id]
            raise InternalError(
                f"release_id {item.release_id!r} was charged before as ε = {eps!r} to dataset {owner!r}, "
                f"now as ε = {item.epsilon!r} to {dataset!r}"
            )
    return fresh


def check_limit(row: BudgetRow, dataset: str, fresh: list[ChargeItem]) -> tuple[list[float], float, float]:
    """(running totals, total, residual) after the fresh items; BudgetExceeded past the limit."""
    running = []
    total, residual = row.spent, row.residual
    for item in fresh:
        total, residual = add_compensated(total, residual, item.epsilon)
        running.append(total)
    if fresh and row.limit is not None and total > row.limit + TOLERANCE:
        raise refusal(dataset, row.limit, row.spent, math.fsum(item.epsilon for item in fresh), len(fresh))
    return running, total, residual


def write_charge(
    cur: duckdb.DuckDBPyConnection, tables: Tables, dataset: str, row: BudgetRow, fresh: list[ChargeItem],
    running: list[float], total: float, residual: float,
) -> None:
    """The history rows and the new total: two statements."""
    now = utc_now()
    cur.execute(
        f"INSERT INTO {tables.history} (release_id, dataset, seq, released_at, mechanism, epsilon,"
        " record_key, statement, spent_after)"
        " SELECT unnest($1::VARCHAR[]), $2, unnest($3::BIGINT[]), $4, unnest($5::VARCHAR[]),"
        " unnest($6::DOUBLE[]), unnest($7::VARCHAR[]), unnest($8::VARCHAR[]), unnest($9::DOUBLE[])",
        [
            [item.release_id for item in fresh],
            dataset,
            list(range(row.releases + 1, row.releases + 1 + len(fresh))),
            now,
            [item.mechanism for item in fresh],
            [item.epsilon for item in fresh],
            [item.record_key for item in fresh],
            [item.statement for item in fresh],
            running,
        ],
    )
    # One upsert whatever the row's state: a new dataset is inserted without a limit, an
    # existing one keeps its limit and creation time.
    cur.execute(
        f"INSERT INTO {tables.budget} (dataset, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
        " updated_at) VALUES ($1, NULL, $2, $3, $4, $5, $5) ON CONFLICT (dataset) DO UPDATE SET"
        " spent_epsilon = excluded.spent_epsilon, spent_residual = excluded.spent_residual,"
        " releases = excluded.releases, updated_at = excluded.updated_at",
        [dataset, total, residual, row.releases + len(fresh), now],
    )


def add_compensated(total: float, residual: float, epsilon: float) -> tuple[float, float]:
    """(total, residual) + epsilon in double-double arithmetic: Knuth's TwoSum gives the exact
    rounding error of total + epsilon, which joins the residual; the pair is then renormalised
    so `total` is the sum rounded once and `residual` what rounding left out."""
    rounded = total + epsilon
    virtual = rounded - total
    error = (total - (rounded - virtual)) + (epsilon - virtual)
    residual += error
    renormalised = rounded + residual
    return renormalised, residual - (renormalised - rounded)


def refusal(dataset: str, limit: float, spent: float, epsilon: float, count: int) -> BudgetExceeded:
    what = "a release costing" if count == 1 else f"{count} releases costing in total"
    headroom = _headroom(limit, spent)
    if headroom is None:
        return BudgetExceeded(
            f"the privacy budget of dataset {dataset!r} is used up (spent ε = {spent:.6g} of limit "
            f"{limit:.6g}): {what} ε = {epsilon:.6g} is refused",
            "raise the dataset's budget limit to release more",
        )
    return BudgetExceeded(
        f"{what} ε = {epsilon:.6g} would exceed the privacy budget of dataset {dataset!r} "
        f"(limit {limit:.6g}, spent {spent:.6g}, remaining {headroom})",
        f"use ε ≤ {headroom} or raise the dataset's budget limit",
    )


def _headroom(limit: float, spent: float) -> str | None:
    """The remaining budget in 6 significant digits, rounded to nearest if that still fits the
    limit (1.0 − 0.8 shows as 0.2), else rounded down — so following the advice never hits the
    limit again. None when nothing is left."""
    remaining = limit - spent
    if remaining <= TOLERANCE:
        return None
    for rounding in (decimal.ROUND_HALF_EVEN, decimal.ROUND_DOWN):
        shown = decimal.Context(prec=6, rounding=rounding).create_decimal(remaining)
        if shown > 0 and spent + float(shown) <= limit + TOLERANCE:
            return f"{float(shown):.6g}"
    return None


def check_item(item: Any) -> None:
    if not isinstance(item, ChargeItem):
        raise InternalError(f"charge_many expects ChargeItem values, got {type(item).__name__}")
    if not hasattr(item.cost, "notion"):
        raise InternalError(f"a charge's cost must be typed (OcdpCost, DpCost, SpCost), got {item.cost!r}")
    check_positive(item.cost.epsilon, "ε")
    if not isinstance(item.release_id, str) or not item.release_id:
        raise InternalError(f"a charge needs a non-empty release_id, got {item.release_id!r}")
    if not isinstance(item.mechanism, str) or not item.mechanism:
        raise InternalError(f"a charge needs a mechanism name, got {item.mechanism!r}")
    for name in ("record_key", "statement"):
        if not isinstance(getattr(item, name), (str, type(None))):
            raise InternalError(f"{name} of a charge must be text or None")


def check_positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise UserError(f"the {what} must be a finite number > 0, got {value!r}", f"pass a positive {what}")
    return float(value)


def is_conflict(exc: BaseException) -> bool:
    """A DuckDB error that a retry from a fresh snapshot resolves: a write-write conflict on a row
    or the catalog, or a duplicate key inserted by a transaction that committed first."""
    if not isinstance(exc, (duckdb.TransactionException, duckdb.ConstraintException)):
        return False
    message = str(exc).lower()
    return "conflict" in message or "duplicate key" in message


def rollback_quietly(cur: Any) -> None:
    # After a failed statement or COMMIT DuckDB may already have ended the transaction.
    try:
        cur.execute("ROLLBACK")
    except duckdb.Error:
        pass


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class BudgetStatus:
    """The budget of one dataset. `limit` and `remaining` are None while no limit is set."""

    dataset: str
    limit: float | None
    spent: float
    remaining: float | None
    releases: int


@dataclass(frozen=True)
class ReleaseRecord:
    """One charged release. `seq` numbers a dataset's releases from 1 in charge order;
    `released_at` is UTC; `spent_after` is the dataset's spent ε once this release was charged."""

    release_id: str
    dataset: str
    seq: int
    released_at: _dt.datetime
    mechanism: str
    epsilon: float
    record_key: str | None
    statement: str | None
    spent_after: float


@dataclass(frozen=True)
class LimitChange:
    """The result of `Ledger.set_limit`. `below_spent` is True when the new limit is below the ε
    already spent: allowed (the owner may tighten a budget), but no release fits until it is raised."""

    dataset: str
    limit: float
    previous_limit: float | None
    spent: float
    below_spent: bool


def new_release_id() -> str:
    """A fresh release id (random, 128 bits). Make it before computing a release and pass the same
    id to every charge of that release, so a retried charge is not charged twice."""
    return os.urandom(16).hex()


def budget_status(dataset: str, limit: float | None, spent: float, releases: int) -> BudgetStatus:
    remaining = None if limit is None else max(0.0, limit - spent)
    return BudgetStatus(dataset, limit, spent, remaining, releases)


def check_dataset(dataset: object) -> None:
    if not isinstance(dataset, str) or not dataset.strip():
        raise UserError(f"invalid dataset name {dataset!r}", "name the dataset with a non-empty string")
    if "\x00" in dataset:
        raise UserError("a dataset name contains a NUL character", "remove it")
