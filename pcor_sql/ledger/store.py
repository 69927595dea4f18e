"""The privacy budget ledger (DESIGN.md §6 "Trust model").

Every release and anomaly answer is charged, before it is shown, to each privacy unit (base
table or file) its relation reads, under its privacy notion (OCDP, ε-DP, (ε, k)-SP), in a
ledger kept in schema `pcor` of the database that holds the data (tables made by
`sql/ledger.sql`). Per unit and notion: the spent ε, an optional limit, the history. A charge
that would take any unit past its limit — or, in a ledger that holds any limit, a charge on a
unit that has none — is refused and writes nothing. Where the ledger lives is decided by
`ledger.location.open_ledger`; analysts and their quotas are in `ledger.analysts`.

Why the ledger composes correctly. Releases reading one unit compose sequentially: k releases
that are ε_1, …, ε_k-DP (here: OCDP, or ε-DP, or (ε_j, k)-SP with the same neighbour relation)
are together (Σ ε_j)-private under that relation (Dwork–Roth 2014, Thm 3.16; the OCDP and SP
arguments are the same product of per-release likelihood ratios). A release reading several
units changes by at most its ε when one unit's data changes, so charging it in full to each
unit keeps each unit's total a valid bound. The notions hold under different neighbour
relations, so their totals are never added. The ledger reads only ε values, never the data.
A refund (an owner's request that failed or was interrupted) removes a release that showed
nothing, so the remaining ones still compose to the lowered total.

Why it cannot be overspent: every charge is one transaction of its store that reads the units'
budget rows (and an analyst's quota row) and then writes them, and the store refuses (and runs
again from a fresh snapshot) a transaction that a concurrent writer's commit would make wrong —
DuckDB's optimistic concurrency and file lock (`duckdb_store`), PostgreSQL's serializable
transactions (`postgres_store`).
- A charge carries a `release_id` chosen before the release is computed; the history's primary
  key makes a repeated charge of one release a no-op, so nothing is charged twice.

The history is the truth: opening a ledger checks every total against it (`consistency`) and
marks the rows of reserving processes that died as interrupted (`outcomes`); a ledger in an
older layout is refused until it is migrated (`layout`, `migration`). Every history row and
every later change of its outcome is linked into a hash chain per (unit, notion), which
`verify` checks the history against and `repair` restores it from (`history_chain`, DESIGN.md §11).
The rules here are written once over a store (`store_interface`, DESIGN.md §11): no SQL in this module.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pcor_sql.errors import InternalError, UserError, warn_privacy
from pcor_sql.ledger import consistency, history_chain_steps, leases
from pcor_sql.ledger.admission_memory import AdmissionMemory, note_charged
from pcor_sql.ledger.charge_rules import ChargeItem, checked_batch, unit_names, within
from pcor_sql.ledger.history_chain import Anchor, ChainDifference, Head
from pcor_sql.ledger.input_checks import NOTIONS, check_notion, check_positive, check_unit
from pcor_sql.ledger.leases import LeaseKeeper
from pcor_sql.ledger.layout import LOCATION_SQL
from pcor_sql.ledger.migration import MigrationReport
from pcor_sql.ledger.records import (
    BudgetStatus,
    LimitChange,
    ReleaseRecord,
    budget_status,
    new_release_id,
)
from pcor_sql.ledger.reservation import Reservation, check_fit, reserve_body
from pcor_sql.ledger.store_interface import LedgerOps, LedgerStore
from pcor_sql.ledger.transactions import LedgerAccess, utc_now

__all__ = ["BudgetStatus", "ChargeItem", "Ledger", "LimitChange", "ReleaseRecord",
           "Reservation", "new_release_id", "NOTIONS", "LOCATION_SQL"]

IN_MEMORY_WARNING = (
    "the budget ledger is in memory and is lost when the process ends — keep it in a file:"
    " ledger='FILE' in Python, --ledger FILE (or --db FILE) on the CLI"
)

_T = TypeVar("_T")


class Ledger:
    """The budget ledger's rules over a store (`store_interface.LedgerStore`): `Ledger(con)` is
    the embedded store in schema `pcor` of `con`'s default database (`duckdb_store`), and
    `Ledger(store=...)` any other (the PostgreSQL store, `postgres_store`).

    Safe to share between threads. An in-memory ledger raises a PrivacyWarning (or calls `warn`)
    once, when it is opened. `busy_timeout` bounds, in seconds, how long a charge retries on
    transaction conflicts. `owned`: the ledger made `con` for itself (a ledger file) and closes
    it in `close()`. `location`: the row of `LOCATION_SQL` if the caller read it already. A
    ledger in an older layout opens, but everything but `migrate` raises the UserError that
    names `pcor-sql budget migrate`.
    """

    def __init__(
        self,
        con: Any = None,
        *,
        warn: Callable[[str], None] | None = None,
        busy_timeout: float = 10.0,
        owned: bool = False,
        location: Sequence[object] | None = None,
        store: LedgerStore | None = None,
        lease_seconds: float | None = None,
    ):
        if not (isinstance(busy_timeout, numbers.Real) and math.isfinite(busy_timeout) and busy_timeout >= 0):
            raise InternalError(f"busy_timeout must be a finite number ≥ 0, got {busy_timeout!r}")
        if store is None:
            from pcor_sql.ledger.duckdb_store import DuckDBStore

            if con is None:
                raise InternalError("a Ledger needs a DuckDB connection or a store")
            store = DuckDBStore(con, busy_timeout=float(busy_timeout), owned=owned, location=location)
        self.store = store
        self.path: str | None = store.path
        self.in_memory: bool = store.in_memory
        self.read_only: bool = store.read_only
        self.access = LedgerAccess(self.transaction, self.read_with)
        self.lease = LeaseKeeper(self.access, leases.lease_seconds(lease_seconds))
        self.mismatches: tuple[consistency.Mismatch, ...] = ()
        if self.in_memory:
            warn_privacy(IN_MEMORY_WARNING, warn, stacklevel=4)
        self._opened()

    def _opened(self) -> None:
        self.layout_problem = self.store.layout_problem()
        if self.store.exists:
            self._check_on_open()

    def _check_on_open(self) -> None:
        """The history is the truth: compare every total with it, and mark the rows of this
        host's reserving processes that ended as 'interrupted'."""
        self.mismatches = consistency.check_on_open(self.read_with, self.transaction, self.read_only,
                                                    by_process=self.store.kind == "duckdb")
        self.lease.looked()  # at the rows of lapsed leases too: the first reservation need not look again

    def close(self) -> None:
        self.lease.close()
        self.store.close()

    @property
    def persistent(self) -> bool:
        return not self.in_memory

    @property
    def kind(self) -> str:
        """'duckdb' (the embedded store) or 'postgresql'."""
        return self.store.kind

    # ---- reading -------------------------------------------------------------------------

    def status(self, unit: str, notion: str = "ocdp") -> BudgetStatus:
        """The budget of `unit` under `notion` (never charged and no limit: spent 0, no limit)."""
        check_unit(unit)
        notion = check_notion(notion)
        return self._statuses(unit, notion)[0]

    def statuses(self, notion: str | None = None) -> tuple[BudgetStatus, ...]:
        """The budget under each notion (or `notion`) of every unit that has a limit, a charge or a
        public mark, sorted by unit and notion."""
        if notion is not None:
            notion = check_notion(notion)
        return tuple(self._statuses(None, notion))

    def strict(self) -> bool:
        """True once the ledger holds any limit (own or default): then a unit without one is refused."""
        return bool(self.read(lambda ops: ops.strict(), False))

    def _statuses(self, unit: str | None, notion: str | None) -> list[BudgetStatus]:
        self._require_layout()
        if not self.store.exists:
            return [budget_status(unit, notion, None, None, 0.0, 0, False)] if unit is not None else []
        return [budget_status(*row) for row in self.read(lambda ops: ops.statuses(unit, notion, NOTIONS), [])]

    def history(self, unit: str | None = None, limit: int | None = None) -> tuple[ReleaseRecord, ...]:
        """The charges of `unit` (or of every unit), oldest first; with `limit`, only the most
        recent `limit` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"history limit must be a positive integer, got {limit!r}", "pass a count ≥ 1")
        if unit is not None:
            check_unit(unit)
        return tuple(ReleaseRecord(*row) for row in reversed(self.read(lambda ops: ops.history(unit, limit), [])))

    # ---- writing -------------------------------------------------------------------------

    def ensure_writable(self) -> None:
        """Raise a UserError if the ledger cannot be charged (read-only, or in an older layout).
        Call it before computing a release, so no work is done that could not be paid for."""
        self._require_layout()
        if self.read_only:
            raise UserError(
                f"database {self._label()} is read-only: the budget ledger cannot be charged",
                "open it read-write",
            )

    def set_limit(self, unit: str, epsilon_limit: float | None, notion: str = "ocdp") -> LimitChange:
        """Set the ε limit of `unit` under `notion` (finite, > 0; None clears it: the notion's
        default limit, if any, applies again). A limit below the ε already spent is allowed and
        reported through `LimitChange.below_spent`."""
        self.ensure_writable()
        check_unit(unit)
        notion = check_notion(notion)
        limit = None if epsilon_limit is None else check_positive(epsilon_limit, "budget limit")

        def body(ops: LedgerOps) -> LimitChange:
            previous, spent = ops.budget_row(unit, notion) or (None, 0.0)
            ops.upsert_limit(unit, notion, limit, utc_now())
            return LimitChange(unit, notion, limit, previous, spent, limit is not None and not within(spent, limit))

        return self.transaction(body)

    def set_default_limit(self, epsilon_limit: float | None, notion: str = "ocdp") -> None:
        """Set (or, with None, clear) the limit that applies under `notion` to units without
        their own. While any default or own limit exists the ledger is strict."""
        self.ensure_writable()
        notion = check_notion(notion)
        value = None if epsilon_limit is None else check_positive(epsilon_limit, "default limit")
        self.transaction(lambda ops: ops.set_setting(f"default_limit_{notion}", value, utc_now()))

    def set_public(self, unit: str, public: bool = True) -> None:
        """Mark `unit` public (a lookup table: never charged) or private again."""
        self.ensure_writable()
        check_unit(unit)
        self.transaction(lambda ops: ops.set_public(unit, bool(public), utc_now()))

    def reserve(self, units: str | Sequence[str], items: Sequence[ChargeItem], *,
                analyst: str | None = None) -> Reservation:
        """Charge `items` to every unit in `units` now, before the work reads any data, in one
        transaction that also checks `analyst`'s quota (see `pcor_sql.ledger.reservation`): the
        history rows say 'running' until an outcome is recorded on the Reservation. Refused
        (BudgetExceeded, Refused): nothing written. Items already charged are skipped."""
        names, batch = self._batch(units, items)
        if analyst is not None and (not isinstance(analyst, str) or not analyst):
            raise InternalError(f"an analyst is named by a non-empty string, got {analyst!r}")
        if not batch:
            raise InternalError("a reservation needs at least one item")
        self.lease.before_reserve()  # DESIGN.md §11 "Dead hosts": reserved under a live lease
        try:
            totals = self.transaction(reserve_body(names, batch, analyst))
        except BaseException:
            self.lease.ended()
            raise
        note_charged(math.fsum(item.epsilon for item in batch))  # what admissions kept is raised by it
        return Reservation(self.access, totals, batch, analyst, on_end=self.lease.ended)

    def check_fit(self, units: str | Sequence[str], items: Sequence[ChargeItem], *, analyst: str | None = None,
                  memory: AdmissionMemory | None = None) -> None:
        """Refuse now (BudgetExceeded) if `reserve` would, for a limit or `analyst`'s quota; writes
        nothing, reserves nothing (`reservation.check_fit`: what it leaves to the reservation).
        `memory`: the service's admissions' memory (`ledger.admission_memory`)."""
        check_fit(self, units, items, analyst, memory)

    def _batch(self, units: str | Sequence[str], items: Iterable[ChargeItem]) -> tuple[tuple[str, ...], tuple[ChargeItem, ...]]:
        self.ensure_writable()
        return unit_names(units), checked_batch(items)

    # ---- the history is the truth --------------------------------------------------------

    def verify(self, anchors: Iterable[Anchor] = ()) -> list[consistency.Mismatch | ChainDifference]:
        """Every unit total and analyst quota total that differs from its history, then every
        history entry its hash chain does not vouch for (`history_chain`; `anchors`: chain heads
        the owner kept outside the ledger), now. Entries that differ refuse releases until
        `repair` (as totals that differ do from the ledger's opening)."""
        totals = list(consistency.mismatches(self.read(lambda ops: ops.mismatches(consistency.RELATIVE_SLACK), [])))
        checks = self.read(lambda ops: history_chain_steps.verify(ops, anchors), [])
        if checks and not self.read_only:
            self.transaction(consistency.flag_for_repair)
        return totals + [d for c in checks for d in c.differences]

    def chain_heads(self) -> dict[tuple[str, str], Head]:
        """Each (unit, notion)'s chain head (link, hash): what the owner keeps outside the ledger."""
        return self.read(history_chain_steps.heads, {})

    def repair(self) -> list[consistency.Mismatch | ChainDifference]:
        """Put back every history row its chain vouches for and record the repair in each chain
        mended (`history_chain`), then reset every total from the history and lift the refusal;
        returns what differed: the entries, then the totals."""
        self.ensure_writable()

        def body(ops: Any) -> list[consistency.Mismatch | ChainDifference]:
            entries = history_chain_steps.repair(ops)
            return [*consistency.repair(ops), *entries]

        found = self.transaction(body)
        self.mismatches = ()
        return list(found)

    def migrate(self, resolve: Callable[[str], Sequence[str]] | None = None) -> MigrationReport:
        """Bring a ledger in an older layout to the current one (`pcor_sql.ledger.migration`),
        then check it as on opening. `resolve(name)`: the units an old budget name spells here
        (none: it stays a unit of its own name)."""
        report = self.store.migrate(resolve)
        if report.changed:
            self._opened()
        return report

    # ---- plumbing ------------------------------------------------------------------------

    def _label(self) -> str:
        return self.store.label()

    def _require_layout(self) -> None:
        if self.layout_problem is not None:
            raise self.layout_problem

    def read(self, body: Callable[[LedgerOps], _T], empty: _T) -> _T:
        """`body` over the ledger's store outside a transaction; `empty` while a read-only
        ledger has no tables."""
        self._require_layout()
        if not self.store.exists:
            return empty
        return self.read_with(body)

    def read_with(self, body: Callable[[LedgerOps], _T]) -> _T:
        """`body` on the store outside any transaction; database failures a user can cause
        become one-line UserErrors. Every read of the ledger outside a transaction comes here."""
        return self.store.read(body)

    def transaction(self, body: Callable[[LedgerOps], _T], *, single: bool = False,
                    beside: bool = False) -> _T:
        """Run `body` in one transaction of the store, run again from a fresh snapshot while a
        concurrent writer conflicts (`LedgerStore.transaction`: `single`, `beside`)."""
        return self.store.transaction(body, single=single, beside=beside)
