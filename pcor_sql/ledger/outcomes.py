"""How a reserved charge ends: its outcome in the history, the ε given back when the owner's
work failed or was interrupted, and the rows of processes that died mid-work.

A reservation writes its history rows with outcome 'running' in the same transaction as the
new totals, before any row of the data is read (DESIGN.md §6 "Reserve, then read"). The
outcome is then written once: the UPDATE matches only rows still 'running', so the first
outcome wins (a second call, a retry after a conflict, or the sweep of another opener
changes nothing). A refund (an owner's failure or interrupt, never an analyst's) is part of
the same transaction: the rows are marked refunded and each unit's total is lowered by
exactly their ε, so the totals stay the sum of the history's unrefunded rows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

from pcor_sql.errors import InternalError
from pcor_sql.ledger.charge_rules import add_compensated
from pcor_sql.ledger.process_identity import is_gone
from pcor_sql.ledger.transactions import utc_now

OUTCOMES = ("running", "answered", "failed", "interrupted", "charged")
#: Reason classes are short words (`not-found`, `data`, `no-valid-context`, `internal`, ...).
MAX_REASON = 64


def check_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason or len(reason) > MAX_REASON or not reason.isprintable():
        raise InternalError(f"an outcome's reason must be a short class such as 'not-found', got {reason!r}")
    return reason


def record_outcome(ops: Any, release_ids: Sequence[str], outcome: str, reason: str | None, refund: bool) -> int:
    """Set the outcome of the rows of `release_ids` still 'running'; with `refund`, give their ε
    back. Returns how many rows changed (0: an outcome was recorded before)."""
    if outcome not in ("answered", "failed", "interrupted"):
        raise InternalError(f"unknown outcome {outcome!r}")
    changed = ops.set_outcome(list(release_ids), outcome, reason, bool(refund), utc_now())
    if refund and changed:
        if any(analyst is not None for *_, analyst in changed):
            raise InternalError("an analyst's charge is never refunded (DESIGN.md §6: reserve, then read)")
        give_back(ops, [(unit, notion, eps) for unit, notion, eps, _ in changed])
    return len(changed)


def give_back(ops: Any, rows: list[tuple[str, str, float]]) -> None:
    """Lower each (unit, notion) total by the ε of its refunded rows, in compensated arithmetic
    (a rounding residue below zero is zero: the exact total of the remaining rows is ≥ 0)."""
    amounts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for unit, notion, eps in rows:
        amounts[(unit, notion)].append(eps)
    for notion in sorted({n for _, n in amounts}):  # one, for a reservation
        current = ops.budget_spent(notion, [u for u, n in amounts if n == notion])
        units, totals, residuals = [], [], []
        for unit, spent, residual in current:
            for eps in amounts[(unit, notion)]:
                spent, residual = add_compensated(spent, residual, -eps)
            if spent <= 0:
                spent, residual = 0.0, 0.0
            units.append(unit), totals.append(spent), residuals.append(residual)
        ops.set_budget_spent(notion, units, totals, residuals, utc_now())


def settle_spent_after(ops: Any, release_ids: Sequence[str]) -> None:
    """After a refund, the `spent_after` of the reservation's rows as the totals now are: a
    refunded row shows the total it left (the one before it: it moved nothing), and a later row
    of the same reservation no longer counts the refunded ε before it. Rows of other
    reservations keep what they were charged at."""
    rows = ops.history_of(list(release_ids))
    back: dict[tuple[str, str], list[float]] = defaultdict(list)
    ids, units, notions, values = [], [], [], []
    for rid, unit, notion, eps, refunded, after in rows:
        given = back[(unit, notion)]
        if refunded:
            given.append(eps)
        if given:
            ids.append(rid), units.append(unit), notions.append(notion)
            values.append(max(0.0, math.fsum([after, *(-x for x in given)])))
    if ids:
        ops.set_spent_after(ids, units, notions, values)


def gone(running: Sequence[tuple[int, str | None]]) -> list[str]:
    """Of the (pid, start token) pairs of this host's 'running' rows, those whose process has
    ended, as `pid:token` keys for `mark_interrupted`."""
    return [f"{pid}:{token or ''}" for pid, token in running if pid is not None and is_gone(int(pid), token)]


def mark_interrupted(ops: Any, host: str, keys: list[str]) -> list[str]:
    """Rows still 'running' of processes of this host that ended: 'interrupted', still charged
    (the work may have read the data and shown something before the process died); returns
    their release ids. (Rows of any host whose lease lapsed: `leases`.)"""
    return ops.mark_interrupted(host, keys, utc_now())
