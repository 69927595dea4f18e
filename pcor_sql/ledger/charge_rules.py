"""The body of a charge: read the budgets, check the limits, write history and totals — the
rules of one ledger transaction, and the arithmetic and refusal messages around it.

A charge is one transaction of three operations of its store, whatever the number of units its
relation reads: one read of everything it needs (`charge_reads`: the units' budget rows, the
default limit, the strictness flag, any release ids already charged, and an analyst's row and
quota rows), one append of the history rows, one write of the budget rows (an analyst's charge
adds one write of the quota rows, `quota_rules`), run by `Ledger.reserve` before the work reads
any row. If another writer committed to the same row meanwhile, the store refuses our write and
the whole body runs again from a fresh snapshot, re-checking the limit.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from collections.abc import Iterable, Sequence
from typing import Any

from pcor_sql.core.accounting import Cost
from pcor_sql.errors import BudgetExceeded, InternalError, Refused, from_python
from pcor_sql.ledger.input_checks import check_positive, check_unit
from pcor_sql.ledger.store_interface import HISTORY_ROW_COLUMNS
from pcor_sql.ledger.transactions import utc_now

#: Float slack when comparing spent + ε with a limit, relative to the limit: releases of ε = 0.1
#: and 0.2 must fit a limit of 0.3 although 0.1 + 0.2 is 0.30000000000000004 in floats. It is
#: relative so that a tiny limit gets a tiny slack: an absolute 1e-12 let 11× a limit of 1e-13
#: through. Running totals are compensated (`add_compensated`), so rounding stays ~1e-16 of
#: the total, far inside 1e-9 of the limit.
RELATIVE_SLACK = 1e-9


def within(total: float, limit: float) -> bool:
    """Whether `total` fits `limit` up to the relative slack."""
    return total <= limit * (1.0 + RELATIVE_SLACK)


@dataclass(frozen=True)
class ChargeItem:
    """One release to charge: its id (chosen before the release is computed), its typed cost,
    the mechanism that made it, what it was about, whether a caller's seed made it (seeded
    runs are recorded "seeded, not private"), who asked (owner or analyst) and the registered
    dataset it went through, if any."""

    release_id: str
    cost: Cost
    mechanism: str
    record_key: str | None = None
    statement: str | None = None
    seeded: bool = False
    role: str = "owner"
    dataset: str | None = None

    @property
    def epsilon(self) -> float:
        return float(self.cost.epsilon)

    @property
    def notion(self) -> str:
        return str(self.cost.notion)


@dataclass(frozen=True)
class UnitRow:
    """One unit's budget row for one notion as a transaction read it (never charged: zeros)."""

    unit: str
    limit: float | None
    spent: float
    residual: float
    releases: int
    public: bool
    #: Whether the ledger holds the row (a charge then updates it; else it inserts one).
    stored: bool = True


@dataclass(frozen=True)
class ChargeState:
    """What one charge reads, in one SELECT: the units' rows, the notion's default limit,
    whether the ledger is strict (holds any limit), and which release ids were charged before."""

    notion: str
    rows: tuple[UnitRow, ...]
    default_limit: float | None
    strict: bool
    seen: dict[str, tuple[frozenset[str], float]]
    needs_repair: bool = False

    def effective_limit(self, row: UnitRow) -> float | None:
        return row.limit if row.limit is not None else self.default_limit

    @property
    def charged(self) -> tuple[UnitRow, ...]:
        """The rows a charge writes: public units are never charged."""
        return tuple(row for row in self.rows if not row.public)


#: The setting that a ledger whose totals do not match its history holds until it is repaired:
#: every charge reads it (in its one SELECT) and is refused while it is set.
NEEDS_REPAIR = "needs_repair"
MISMATCH_PROBLEM = ("the budget ledger's spent totals (or history entries) do not match its history (or its hash"
                    " chain), so releases are refused")


def mismatch_fix() -> str:
    """The fix of a mismatch, spelled for the caller (the command line, or Python)."""
    if from_python():
        return ("see the differences with Owner.verify_ledger() (`pcor-sql budget verify`), then reset the totals"
                " from the history with Owner.repair_ledger() (`pcor-sql budget repair`)")
    return ("see the differences with `pcor-sql budget verify`, then reset the totals from the history with"
            " `pcor-sql budget repair`")

#: The ledger's tables in schema `pcor` (made by sql/ledger.sql).
TABLE_NAMES = ("budget", "units", "settings", "history", "datasets", "analysts", "quotas", "history_chain",
               "chain_heads", "leases")


@dataclass(frozen=True)
class Tables:
    """The ledger's tables, as qualified SQL names (all in schema `pcor`)."""

    prefix: str

    def __getattr__(self, name: str) -> str:
        if name in TABLE_NAMES:
            return self.prefix + name
        raise AttributeError(name)


def fresh_items(state: ChargeState, batch: tuple[ChargeItem, ...]) -> list[ChargeItem]:
    """The items not charged before; an id charged before with another ε is a bug."""
    fresh = []
    for item in batch:
        if item.release_id not in state.seen:
            fresh.append(item)
        elif state.seen[item.release_id] != (frozenset(r.unit for r in state.charged), item.epsilon):
            units, eps = state.seen[item.release_id]
            raise InternalError(
                f"release_id {item.release_id!r} was charged before as ε = {eps!r} to {sorted(units)}, "
                f"now as ε = {item.epsilon!r} to {sorted(r.unit for r in state.charged)}"
            )
    return fresh


@dataclass(frozen=True)
class UnitTotal:
    """A unit's total after a charge: its running totals per fresh item, the total, the residual."""

    row: UnitRow
    limit: float | None
    running: tuple[float, ...]
    total: float
    residual: float


def check_limits(state: ChargeState, fresh: list[ChargeItem]) -> tuple[UnitTotal, ...]:
    """Each charged unit's totals after the fresh items. Refused (nothing written): a unit past
    its limit (BudgetExceeded), or a unit without a limit in a strict ledger (Refused)."""
    if state.needs_repair:
        raise Refused(MISMATCH_PROBLEM, mismatch_fix())
    out = []
    for row in state.charged:
        limit = state.effective_limit(row)
        if fresh and limit is None and state.strict:
            raise Refused(
                f"unit {row.unit!r} has no {state.notion} limit, and this ledger holds limits, so every unit needs one",
                f"set one: pcor-sql budget set-limit {row.unit!r} EPSILON --notion {state.notion}"
                f" (or a default for all units: pcor-sql budget default-limit EPSILON --notion {state.notion})",
            )
        running = []
        total, residual = row.spent, row.residual
        for item in fresh:
            total, residual = add_compensated(total, residual, item.epsilon)
            running.append(total)
        if fresh and limit is not None and not within(total, limit):
            raise refusal(row.unit, state.notion, limit, row.spent, math.fsum(i.epsilon for i in fresh), len(fresh))
        out.append(UnitTotal(row, limit, tuple(running), total, residual))
    return tuple(out)


@dataclass(frozen=True)
class Provenance:
    """What a charge records besides its items: its outcome ('running' for a reservation,
    'charged' for a charge that records none), the named analyst, and the reserving process
    (pid, host, start token; None when the outcome is not 'running')."""

    outcome: str = "charged"
    analyst: str | None = None
    process: Any = None


def write_charge(
    ops: Any, state: ChargeState, fresh: list[ChargeItem], totals: tuple[UnitTotal, ...],
    provenance: Provenance = Provenance(),
) -> None:
    """The history rows (one per fresh item and charged unit) and the units' new totals: two
    writes of the store, whatever the number of units."""
    if not fresh or not totals:
        return
    now = utc_now()
    process = provenance.process
    columns: dict[str, list[object]] = {name: [] for name in HISTORY_ROW_COLUMNS}
    for t in totals:
        for j, item in enumerate(fresh):
            for name, value in (
                ("release_id", item.release_id), ("unit", t.row.unit), ("seq", t.row.releases + 1 + j),
                ("mechanism", item.mechanism), ("epsilon", item.epsilon), ("k", getattr(item.cost, "k", None)),
                ("record_key", item.record_key), ("statement", item.statement), ("spent_after", t.running[j]),
                ("seeded", item.seeded), ("role", item.role), ("dataset", item.dataset),
            ):
                columns[name].append(value)
    ops.append_history([state.notion, now, provenance.outcome, provenance.analyst, getattr(process, "pid", None),
                        getattr(process, "host", None), getattr(process, "token", None)], columns)
    units, spent, residual = [t.row.unit for t in totals], [t.total for t in totals], [t.residual for t in totals]
    releases = [t.row.releases + len(fresh) for t in totals]
    # Rows the transaction read: an UPDATE; a row deleted meanwhile by a committed writer is a
    # conflict (the body runs again), so every row is found. Some row new: an upsert (a new unit
    # gets no limit, an existing one keeps its limit and creation time).
    stored = all(t.row.stored for t in totals)
    changed = ops.update_budgets(state.notion, units, spent, residual, releases, now, stored)
    if stored and changed != len(totals):
        raise InternalError(f"the budget rows of {units} changed under a charge ({changed} of {len(totals)} found)")


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


def refusal(unit: str, notion: str, limit: float, spent: float, epsilon: float, count: int, *,
            budget: str | None = None, fix: str = "the unit's budget limit") -> BudgetExceeded:
    what = "a release costing" if count == 1 else f"{count} releases costing in total"
    headroom = _headroom(limit, spent)
    budget = budget or f"the {notion} privacy budget of unit {unit!r}"
    if headroom is None:
        return BudgetExceeded(
            f"{budget} is used up (spent ε = {spent:.6g} of limit {limit:.6g}): {what} ε = {epsilon:.6g} is refused",
            f"raise {fix} to release more",
        )
    return BudgetExceeded(
        f"{what} ε = {epsilon:.6g} would exceed {budget} (limit {limit:.6g}, spent {spent:.6g}, remaining {headroom})",
        f"use ε ≤ {headroom} or raise {fix}",
    )


def _headroom(limit: float, spent: float) -> str | None:
    """The remaining budget in 6 significant digits, rounded to nearest if that still fits the
    limit (1.0 − 0.8 shows as 0.2), else rounded down — so following the advice never hits the
    limit again. None when nothing is left."""
    remaining = limit - spent
    if remaining <= limit * RELATIVE_SLACK:
        return None
    for rounding in (decimal.ROUND_HALF_EVEN, decimal.ROUND_DOWN):
        shown = decimal.Context(prec=6, rounding=rounding).create_decimal(remaining)
        if shown > 0 and within(spent + float(shown), limit):
            return f"{float(shown):.6g}"
    return None


def check_item(item: Any) -> None:
    if not isinstance(item, ChargeItem):
        raise InternalError(f"a charge takes ChargeItem values, got {type(item).__name__}")
    if not hasattr(item.cost, "notion"):
        raise InternalError(f"a charge's cost must be typed (OcdpCost, DpCost, SpCost), got {item.cost!r}")
    check_positive(item.cost.epsilon, "ε")
    if not isinstance(item.release_id, str) or not item.release_id:
        raise InternalError(f"a charge needs a non-empty release_id, got {item.release_id!r}")
    if not isinstance(item.mechanism, str) or not item.mechanism:
        raise InternalError(f"a charge needs a mechanism name, got {item.mechanism!r}")
    for name in ("record_key", "statement", "dataset"):
        if not isinstance(getattr(item, name), (str, type(None))):
            raise InternalError(f"{name} of a charge must be text or None")
    if item.role not in ("owner", "analyst") or not isinstance(item.seeded, bool):
        raise InternalError(f"a charge's role must be owner or analyst and seeded a bool, got {item!r}")


def unit_names(units: str | Sequence[str]) -> tuple[str, ...]:
    if not isinstance(units, (str, list, tuple)):
        check_unit(units)  # the one-line error for a single bad name
    names = (units,) if isinstance(units, str) else tuple(units)
    if not names:
        raise InternalError("a charge needs at least one unit")
    for unit in names:
        check_unit(unit)
    return tuple(sorted(set(names)))


def checked_batch(items: Iterable[ChargeItem]) -> tuple[ChargeItem, ...]:
    """The items of one charge: valid, one notion, distinct release ids."""
    batch = tuple(items)
    for item in batch:
        check_item(item)
    if len({item.notion for item in batch}) > 1:
        raise InternalError("one batch of charges mixes privacy notions")
    ids = [item.release_id for item in batch]
    if len(set(ids)) != len(ids):
        raise InternalError("one batch of charges repeats a release_id")
    return batch


def binding(totals: tuple[UnitTotal, ...], after: bool) -> tuple[float, float | None]:
    """(spent, limit) of the unit with the least headroom (limit None when no unit has one; then
    the largest spent): spent after the charge if `after`, else as the check read it."""
    if not totals:
        return 0.0, None

    def spent(t: UnitTotal) -> float:
        return t.total if after else t.row.spent

    limited = [t for t in totals if t.limit is not None]
    if not limited:
        return max(spent(t) for t in totals), None
    t = min(limited, key=lambda t: t.limit - t.total)  # type: ignore[operator]
    return spent(t), t.limit
