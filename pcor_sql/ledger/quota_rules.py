"""An analyst's part of a charge: who they are, what they may use, and their quotas — read,
checked and written inside the charge's own transaction (`Ledger.reserve`), so a charge fits
both every unit's limit and the analyst's quota, atomically (DESIGN.md §6).

Why a quota cannot be overspent: every charge of analyst A under notion n updates the row
(A, n, '') of the quotas (made if missing), so two concurrent charges of A conflict on it
exactly as two charges of one unit conflict on its budget row; the loser is retried from a
fresh snapshot and sees the winner's spend. Revoking A updates the same rows, so a charge in
flight when A is revoked conflicts too and is re-checked, and refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pcor_sql.errors import AnalystRefused, InternalError
from pcor_sql.ledger.charge_rules import ChargeItem, add_compensated, refusal, utc_now, within

#: The dataset key of an analyst's quota over all datasets together.
ALL_DATASETS = ""


@dataclass(frozen=True)
class QuotaRow:
    dataset: str
    limit: float | None
    spent: float
    residual: float
    releases: int


@dataclass(frozen=True)
class QuotaState:
    """What a charge of `analyst` reads, in one SELECT: whether they exist and are revoked, the
    registered datasets they may use (None: all), and their quota rows for the notion."""

    analyst: str
    notion: str
    exists: bool
    revoked: bool
    allowed: tuple[str, ...] | None
    rows: dict[str, QuotaRow]


@dataclass(frozen=True)
class QuotaTotal:
    dataset: str
    total: float
    residual: float
    releases: int


def quota_datasets(datasets: list[str]) -> list[str]:
    """The quota rows a charge over `datasets` reads: all datasets together, and each one."""
    return [ALL_DATASETS, *datasets]


def quota_rows(found: dict[str, list[tuple]]) -> dict[str, QuotaRow]:
    """The quota rows as read ('q'), by dataset."""
    return {r[0]: QuotaRow(*r[:5]) for r in found.get("q", [])}


def quota_state(analyst: str, notion: str, found: dict[str, list[tuple]]) -> QuotaState:
    """The QuotaState from the rows a charge read ('a', 'q': `LedgerOps.charge_rows`), by tag."""
    [who] = found.get("a") or [None]
    rows = quota_rows(found)
    if who is None:
        return QuotaState(analyst, notion, False, False, None, rows)
    allowed = who[5]
    return QuotaState(analyst, notion, True, who[4] == 1, None if allowed is None else tuple(allowed), rows)


def check_quotas(state: QuotaState, fresh: list[ChargeItem]) -> tuple[QuotaTotal, ...]:
    """The analyst's quota rows after the fresh items. Refused (nothing written): an unknown or
    revoked analyst, a dataset they may not use, or a quota it would pass (BudgetExceeded)."""
    who = f"analyst {state.analyst!r}"
    if not state.exists:
        raise AnalystRefused(f"there is no {who}", "the owner names analysts: pcor-sql analyst add NAME")
    if state.revoked:
        raise AnalystRefused(f"{who} is revoked", "ask the owner for a new token")
    if state.allowed is not None:
        for item in fresh:
            if item.dataset not in state.allowed:
                what = "a request outside the registered datasets" if item.dataset is None else f"dataset {item.dataset!r}"
                raise AnalystRefused(f"{who} may not use {what}",
                              f"use one of: {', '.join(state.allowed) or 'none (ask the owner)'}")
    groups: dict[str, list[ChargeItem]] = {ALL_DATASETS: list(fresh)} if fresh else {}
    for item in fresh:
        if item.dataset is not None:
            groups.setdefault(item.dataset, []).append(item)
    out = []
    for dataset, items in groups.items():
        row = state.rows.get(dataset, QuotaRow(dataset, None, 0.0, 0.0, 0))
        total, residual = row.spent, row.residual
        for item in items:
            total, residual = add_compensated(total, residual, item.epsilon)
        if row.limit is not None and not within(total, row.limit):
            where = "" if dataset == ALL_DATASETS else f" on dataset {dataset!r}"
            raise refusal(state.analyst, state.notion, row.limit, row.spent, math.fsum(i.epsilon for i in items),
                          len(items), budget=f"the {state.notion} quota of {who}{where}", fix="the analyst's quota")
        out.append(QuotaTotal(dataset, total, residual, row.releases + len(items)))
    return tuple(out)


def write_quotas(ops: Any, state: QuotaState, totals: tuple[QuotaTotal, ...]) -> None:
    """One write of the analyst's quota rows: new rows get no limit, existing ones keep theirs
    (rows the transaction read: an UPDATE, as for the budget rows, `charge_rules.write_charge`)."""
    if not totals:
        return
    datasets, spent = [t.dataset for t in totals], [t.total for t in totals]
    residual, releases, now = [t.residual for t in totals], [t.releases for t in totals], utc_now()
    stored = all(t.dataset in state.rows for t in totals)
    changed = ops.update_quotas(state.analyst, state.notion, datasets, spent, residual, releases, now, stored)
    if stored and changed != len(totals):
        raise InternalError(f"the quota rows of analyst {state.analyst!r} changed under a charge")
