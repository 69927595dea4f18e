"""The history is the truth (DESIGN.md §6): spent totals checked against it, and reset from it.

A unit's spent ε under a notion must equal the sum of ε over its history rows that were not
refunded; an analyst's quota row, the sum over that analyst's releases (one per release_id,
however many units it was charged to). Every writer keeps this in one transaction, so a
difference means a hand edit or a lost write: the ledger then refuses charges until the owner
has looked (`pcor-sql budget verify`) and reset the totals (`pcor-sql budget repair`). Limits,
public marks and quotas' limits are not in the history and are left alone; a budget row
deleted by hand comes back without its limit.

Equal means equal up to 1e-9 of the ε that ever flowed through the row (refunds included):
the totals are kept in compensated arithmetic, so honest rounding is ~1e-16 of that, while a
hand edit or a lost charge of even 1e-9 of it is found.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from pcor_sql.ledger import history_chain_steps, leases
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, RELATIVE_SLACK
from pcor_sql.ledger.history_chain import CHANGE
from pcor_sql.ledger.outcomes import gone, mark_interrupted
from pcor_sql.ledger.process_identity import current_process
from pcor_sql.ledger.transactions import utc_now


class Mismatch(NamedTuple):
    """A total that differs from its history: `unit` is a unit's name, or `analyst:NAME` (an
    analyst's quota over all datasets) or `analyst:NAME/DATASET`."""

    unit: str
    notion: str
    spent_total: float
    history_sum: float


def mismatches(rows: Any) -> tuple[Mismatch, ...]:
    return tuple(Mismatch(*(r.values() if isinstance(r, dict) else r)) for r in rows or [])


def flag_for_repair(ops: Any) -> None:
    """Make every charge refuse until `repair` (the flag is read by each charge's one read)."""
    ops.set_setting(NEEDS_REPAIR, 1, utc_now())


def repair(ops: Any) -> tuple[Mismatch, ...]:
    """Reset every unit total and analyst quota total from the history (spent = the sum of its
    unrefunded ε, releases = its row count), clear the repair flag, and return what differed."""
    found = mismatches(ops.mismatches(RELATIVE_SLACK))
    ops.reset_totals(utc_now())
    ops.delete_setting(NEEDS_REPAIR)
    return found


def check_on_open(read: Callable[[Callable[[Any], Any]], Any], transaction: Callable[[Any], Any],
                  read_only: bool, *, by_process: bool = False) -> tuple[Mismatch, ...]:
    """What opening a ledger does: one read (`LedgerOps.open_state`), then, only when something
    was found and the ledger is writable, one transaction that marks 'interrupted' the rows
    still running whose holder holds no live lease (`leases`, DESIGN.md §11 "Dead hosts") — and,
    with `by_process` (the embedded store, which one process writes at a time), the rows of this
    host's processes that ended (`outcomes.gone`), found without waiting for their lease — and
    flags a mismatch for repair. Returns the mismatches."""
    me = current_process()
    found, running, flagged = read(lambda ops: ops.open_state(RELATIVE_SLACK))
    differ = mismatches(found)
    holders = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in running or []]
    unleased = any(not leased for *_, leased in holders)
    ended = gone([(pid, token) for host, pid, token, leased in holders if leased and host == me.host]) if by_process else []
    if read_only or not (unleased or ended or (differ and not flagged)):
        return differ

    def body(ops: Any) -> None:
        if unleased:
            leases.sweep(ops)
        if ended:
            history_chain_steps.record(ops, mark_interrupted(ops, me.host, ended), CHANGE)
        if differ and not flagged:
            flag_for_repair(ops)

    transaction(body)
    return differ
