"""A reservation (`Ledger.reserve`): the cost charged before any row of the data is read, with
the history rows written as 'running', and then the outcome of the work.

    r = ledger.reserve(units, items, analyst="ana")   # refused here, or charged from here on
    try:
        answer = work()
    except KeyboardInterrupt:
        r.interrupted(refund=is_owner); raise
    except Failure as exc:
        r.failed(exc.reason_class, refund=is_owner); raise
    r.answered()

One transaction reserves: it reads every unit's budget row (and the analyst's identity and
quota rows), checks the limits strictly as a charge does, and writes the history rows —
outcome 'running', with the reserving process's pid, host and start token — and the new
totals; refused means nothing was written. Why that cannot overspend, across threads and
processes, is in `pcor_sql.ledger.store` and `quota_rules`. An outcome is written once (the
first call wins; later ones return False without writing); a refund lowers the totals by
exactly the refunded rows' ε in the same transaction (`outcomes`). If the process dies before
the outcome, the rows stay 'running' until its lease lapses and whoever looks next marks them
'interrupted' (`leases`; on the embedded store, also a ledger opened on this host once the
process has ended), keeping them charged: whatever the work showed before it died was paid for.
`check_fit` is an early, cheap refusal for a limit or quota (it reserves nothing).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, TypeVar

from pcor_sql.errors import InternalError
from pcor_sql.ledger.charge_reads import read_state, read_state_with, settings_of, unit_rows
from pcor_sql.ledger.charge_rules import (
    ChargeItem,
    ChargeState,
    Provenance,
    UnitTotal,
    binding,
    check_limits,
    checked_batch,
    fresh_items,
    unit_names,
    write_charge,
)
from pcor_sql.ledger import history_chain_steps
from pcor_sql.ledger.history_chain import CHANGE
from pcor_sql.ledger.outcomes import check_reason, record_outcome, settle_spent_after
from pcor_sql.ledger.process_identity import current_process
from pcor_sql.ledger.quota_rules import (
    ALL_DATASETS,
    QuotaState,
    check_quotas,
    quota_datasets,
    quota_rows,
    quota_state,
    write_quotas,
)
from pcor_sql.ledger.store_interface import LedgerOps
from pcor_sql.ledger.transactions import LedgerAccess

if TYPE_CHECKING:  # annotations only
    from pcor_sql.ledger.admission_memory import AdmissionMemory


def reserve_body(units: tuple[str, ...], batch: tuple[ChargeItem, ...],
                 analyst: str | None) -> Callable[[LedgerOps], tuple[UnitTotal, ...]]:
    """The body of the reservation's transaction; returns the units' totals after it."""
    notion = batch[0].notion
    provenance = Provenance("running", analyst, current_process())
    datasets = sorted({i.dataset for i in batch if i.dataset is not None})

    def body(ops: LedgerOps) -> tuple[UnitTotal, ...]:
        ids = [i.release_id for i in batch]
        quota, quotas = None, ()
        if analyst is None:
            state = read_state(ops, units, notion, ids)
        else:  # the analyst's rows in the same read: one statement less inside the transaction
            state, found = read_state_with(ops, units, notion, ids, analyst, quota_datasets(datasets))
            quota = quota_state(analyst, notion, found)
        fresh = fresh_items(state, batch)
        totals = check_limits(state, fresh)
        if quota is not None:
            quotas = check_quotas(quota, fresh if totals else [])
        write_charge(ops, state, fresh, totals, provenance)
        if totals:  # the rows just written, linked into their chains (DESIGN.md §11)
            history_chain_steps.record(ops, [i.release_id for i in fresh], "charge")
        if quota is not None and totals:  # nothing charged (public units only): no quota spent
            write_quotas(ops, quota, quotas)
        return totals

    return body


_T = TypeVar("_T")


class FitReads(Protocol):
    """What `check_fit` asks of its ledger (`store.Ledger`, which this module cannot import:
    it imports this one): writable, and one read outside any transaction."""

    def ensure_writable(self) -> None: ...

    def read_with(self, body: Callable[[LedgerOps], _T]) -> _T: ...


def check_fit(ledger: FitReads, units: Sequence[str], items: Sequence[ChargeItem], analyst: str | None,
              memory: AdmissionMemory | None = None) -> None:
    """Refuse early and cheaply when `ledger.reserve(units, items, analyst=analyst)` would refuse
    for a limit: a unit's (its own or the notion's default) or the analyst's quota would be
    passed (BudgetExceeded, with the reservation's own arithmetic and words: `check_limits`,
    `check_quotas`). One small read, no write, no transaction: a refusal is justified by one
    committed snapshot, so it is the answer the reservation would have given at that moment.

    Passing is no reservation, and this checks less than the reservation does: a unit without
    a limit in a strict ledger, totals that need repair, an unknown or revoked analyst and
    release ids charged before are left to it. The reservation checks everything, atomically,
    and alone decides what is charged. The analyst service runs this before a request waits
    for a worker (`pcor_sql.pipeline.admit`). `memory`: an `AdmissionMemory` that may admit
    from a state read before, raised by what this process charged since (never refuses)."""
    ledger.ensure_writable()
    names, batch = unit_names(units), checked_batch(items)
    if not batch:
        raise InternalError("a check needs at least one item")
    notion = batch[0].notion
    datasets = sorted({i.dataset for i in batch if i.dataset is not None})

    def read(ops: LedgerOps) -> dict[str, list[tuple]]:
        return ops.fit_rows(list(names), notion, analyst, quota_datasets(datasets))

    def judge(found: dict[str, list[tuple]], raised: float) -> None:
        rows = tuple(replace(r, spent=r.spent + raised) for r in unit_rows(found, names))
        state = ChargeState(notion, rows, settings_of(found).get(f"default_limit_{notion}"), False, {})
        totals = check_limits(state, list(batch))
        if analyst is None or not totals:  # nothing charged (public units only): no quota spent
            return
        quotas = {d: replace(q, spent=q.spent + raised) for d, q in quota_rows(found).items()}
        check_quotas(QuotaState(analyst, notion, True, False, None, quotas), list(batch))

    if memory is None:
        judge(ledger.read_with(read), 0.0)
    else:
        memory.check(analyst or "", (notion, names, tuple(datasets)), lambda: ledger.read_with(read), judge)


#: Failure reasons that mean the work was cut off rather than failed.
INTERRUPTING = frozenset({"worker-lost"})


def _ending(reason: str) -> str:
    return "interrupted" if reason in INTERRUPTING else "failed"


class Reservation:
    """A reserved charge (see the module docstring). `spent`, `limit`: the binding unit's total
    after the charge and its limit (None if no unit has one, `charge_rules.binding`);
    `release_ids`: one per item; `outcome`: None until one is recorded."""

    def __init__(self, access: LedgerAccess, totals: tuple[UnitTotal, ...], batch: tuple[ChargeItem, ...],
                 analyst: str | None, on_end: Callable[[], None] | None = None):
        self._access = access
        # Told once: when the outcome is written (or its write failed), or when the reservation is
        # dropped without one — its lease then lapses and its rows are marked (`leases`).
        self._ended = weakref.finalize(self, on_end) if on_end is not None else None
        self._totals = totals
        self.release_ids: tuple[str, ...] = tuple(item.release_id for item in batch)
        self.analyst = analyst
        self._for_analyst = analyst is not None or any(item.role == "analyst" for item in batch)
        self.spent, self.limit = binding(totals, True)
        self.outcome: str | None = None
        self._lock = threading.Lock()

    def answered(self) -> bool:
        """The work answered: outcome 'answered'."""
        return self._finish("answered", None, False)

    def failed(self, reason: str, *, refund: bool) -> bool:
        """The work failed, for a short `reason` class ('not-found', 'data', 'no-valid-context',
        'internal', ...). `refund` (the owner's requests only) gives the ε back: the history then
        says 'failed (not charged)'. An analyst's failure is never refunded (DESIGN.md §6). A
        search process that died ('worker-lost') is recorded 'interrupted', with that reason
        (DESIGN.md §10): the work was cut off, not refused by the data."""
        return self._finish(_ending(check_reason(reason)), reason, refund)

    def interrupted(self, *, refund: bool) -> bool:
        """The work was interrupted (Ctrl-C); `refund` as for `failed`."""
        return self._finish("interrupted", None, refund)

    def settle(self, failures: Mapping[int, str], *, refund: bool) -> bool:
        """A batch's outcome per record: the items at the indices of `failures` failed (each
        with its reason class), every other one answered; `refund` gives back the failed ones'
        ε only (the owner's). One transaction; `outcome` is then 'partial' when some answered."""
        if not failures:
            return self.answered()
        groups: dict[tuple[str, str | None], list[str]] = {}
        for i, rid in enumerate(self.release_ids):
            key = (_ending(check_reason(failures[i])), failures[i]) if i in failures else ("answered", None)
            groups.setdefault(key, []).append(rid)
        whole = "failed" if len(failures) == len(self.release_ids) else "partial"
        return self._finish(whole, None, refund, groups)

    def _finish(self, outcome: str, reason: str | None, refund: bool,
                groups: Mapping[tuple[str, str | None], Sequence[str]] | None = None) -> bool:
        if not isinstance(refund, bool):
            raise InternalError(f"refund must be True or False, got {refund!r}")
        if refund and self._for_analyst:
            raise InternalError("an analyst's charge is never refunded (DESIGN.md §6: reserve, then read)")
        with self._lock:
            if self.outcome is not None:
                return False
            # First call wins, even if its write fails below: the rows then stay 'running' and are
            # found 'interrupted' (still charged) when the ledger is next opened — never refunded.
            self.outcome = outcome
        ids = self.release_ids
        groups = groups if groups is not None else {(outcome, reason): ids}

        def body(ops: LedgerOps) -> int:
            changed = sum(record_outcome(ops, rows, what, why, refund and what != "answered")
                          for (what, why), rows in groups.items())
            if refund and changed:
                settle_spent_after(ops, ids)
            if changed:  # the change linked into the rows' chains (DESIGN.md §11)
                history_chain_steps.record(ops, ids, CHANGE)
            return changed

        # An outcome appends to its units' chains, as charges do, so it is one transaction in
        # turn with them (beside them, it would meet their writes of the chains' heads).
        try:
            changed = self._access.transaction(body)
        finally:
            if self._ended is not None:
                self._ended()
        return changed > 0

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        """A block left without an outcome records one, never refunding: an interrupt as
        'interrupted', anything else as 'failed' with reason 'internal'."""
        if self.outcome is None:
            if kind is not None and issubclass(kind, (KeyboardInterrupt, SystemExit)):
                self.interrupted(refund=False)
            else:
                self.failed("internal", refund=False)
