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

Why it cannot be overspent.
- In one process, each charge is one DuckDB transaction that reads the units' budget rows (and
  an analyst's quota row) and then writes them. DuckDB's optimistic concurrency refuses the
  second of two transactions that write one row ("Conflict on update"), or insert one key; the
  loser is rolled back and retried from a fresh snapshot, where it sees the winner's charge.
  So every committed charge was checked against every charge committed before it.
- Across processes, DuckDB lets one process at a time open a database file read-write (a file
  lock); `connect_with_retry` waits for the lock, so processes take turns.
- A charge carries a `release_id` chosen before the release is computed; the history's primary
  key makes a repeated charge of one release a no-op, so nothing is charged twice.

The history is the truth: opening a ledger checks every total against it (`consistency`) and
marks the rows of reserving processes that died as interrupted (`outcomes`); a ledger in an
older layout is refused until it is migrated (`layout`, `migration`). Every history row and
every later change of its outcome is linked into a hash chain per (unit, notion), which
`verify` checks the history against and `repair` restores it from (`history_chain`, DESIGN.md §11).
"""

from __future__ import annotations

import math
import numbers
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import duckdb

from pcor_sql.errors import InternalError, UserError, warn_privacy
from pcor_sql.ledger import consistency, history_chain_steps
from pcor_sql.ledger.admission_memory import AdmissionMemory, note_charged, refuse_reads
from pcor_sql.ledger.charge_rules import ChargeItem, Tables, checked_batch, unit_names, within
from pcor_sql.ledger.input_checks import NOTIONS, check_notion, check_positive, check_unit
from pcor_sql.ledger.history_chain import Anchor, ChainDifference, Head
from pcor_sql.ledger.layout import COLUMNS_SQL, LOCATION_SQL, Layout
from pcor_sql.ledger.migration import MigrationReport, read_legacy
from pcor_sql.ledger.migration import migrate as migration_body
from pcor_sql.ledger.records import (
    BudgetStatus,
    LimitChange,
    ReleaseRecord,
    budget_status,
    history_query,
    new_release_id,
    statuses_query,
)
from pcor_sql.ledger.reservation import Reservation, check_fit, reserve_body
from pcor_sql.ledger.transactions import LedgerAccess, ledger_failure, run_transaction, utc_now
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.quoting import quote_identifier

__all__ = ["BudgetStatus", "ChargeItem", "Ledger", "LimitChange", "ReleaseRecord",
           "Reservation", "new_release_id", "NOTIONS", "LOCATION_SQL"]

IN_MEMORY_WARNING = (
    "the budget ledger is in memory and is lost when the process ends — keep it in a file:"
    " ledger='FILE' in Python, --ledger FILE (or --db FILE) on the CLI"
)

_T = TypeVar("_T")


class Ledger:
    """The budget ledger in schema `pcor` of database `database` of `con` (default: the
    connection's default database, read on a fresh cursor, so a `USE` by the caller cannot
    move it).

    Every operation runs on a private cursor of `con`, naming the ledger's tables in full, so
    the caller's open transaction, half-read result or later `USE` is never touched, and a
    charge is committed on its own. Safe to share between threads. An in-memory ledger raises
    a PrivacyWarning (or calls `warn`) once, when it is opened. `busy_timeout` bounds, in
    seconds, how long a charge retries on transaction conflicts. `owned`: the ledger made `con`
    for itself (a ledger file) and closes it in `close()`. `location`: the row of
    `LOCATION_SQL` if the caller read it already. A ledger in an older layout opens, but
    everything but `migrate` raises the UserError that names `pcor-sql budget migrate`.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        warn: Callable[[str], None] | None = None,
        busy_timeout: float = 10.0,
        owned: bool = False,
        location: Sequence[object] | None = None,
    ):
        if not (isinstance(busy_timeout, numbers.Real) and math.isfinite(busy_timeout) and busy_timeout >= 0):
            raise InternalError(f"busy_timeout must be a finite number ≥ 0, got {busy_timeout!r}")
        self._con = con
        self._owned = owned
        self._busy_timeout = float(busy_timeout)
        self._cursor_lock = threading.Lock()
        # One write transaction at a time from this process: threads sharing the Ledger (the
        # service's workers) would otherwise collide on the same budget rows, and each collision
        # costs a whole transaction again plus a backoff sleep (measured: 15 conflicts for 24
        # requests from 2 threads; throughput flat from 4 workers on). Other processes on the
        # same ledger (DuckDB files admit one writer process; in-memory ledgers are private)
        # still meet the retry loop.
        self._write_lock = threading.RLock()
        # Jitter for retry sleeps only (spreads colliding writers apart); it never touches a
        # release, so it need not come from the release's randomness source.
        self._jitter = random.Random()
        database, path, read_only, tables = location or self._location()
        self.database: str = database
        self.path: str | None = path or None
        self.in_memory: bool = self.path is None
        self.read_only: bool = bool(read_only)
        self.tables = Tables(f"{quote_identifier(database)}.pcor.")
        self.access = LedgerAccess(lambda: self._cursor(), self.transaction, self.tables, lambda e: ledger_failure(e, self._label()))
        self.mismatches: tuple[consistency.Mismatch, ...] = ()
        if self.in_memory:
            warn_privacy(IN_MEMORY_WARNING, warn, stacklevel=4)
        self._open(self._layout(tables))

    def _open(self, layout: Layout) -> None:
        self.layout_problem = layout.problem(self._label())
        self._exists = layout.current
        if layout.absent and not self.read_only:
            # Two cursors creating the tables at once is a catalog conflict: retried like a charge.
            use = f"USE {quote_identifier(self.database)}"
            self.transaction(lambda cur: (cur.execute(use), cur.execute(sql_text("ledger.sql"))))
            self._exists = True
        if self._exists and not self.read_only:
            self._ensure_release_index()
        if self._exists:
            self._check_on_open()

    def _ensure_release_index(self) -> None:
        """The history's index on release_id (sql/ledger.sql), made once for a ledger from before it."""
        found = self._plain("SELECT count(*) FROM system.main.duckdb_indexes() WHERE database_name = $1 AND schema_name = 'pcor'"
                            " AND index_name = 'history_release_id'", [self.database])
        if not found[0][0]:
            self.transaction(lambda cur: cur.execute(
                f"CREATE INDEX IF NOT EXISTS history_release_id ON {self.tables.history} (release_id)"))

    def _check_on_open(self) -> None:
        """The history is the truth: compare every total with it, and mark the rows of this
        host's reserving processes that ended as 'interrupted'."""
        self.mismatches = consistency.check_on_open(self.read, self.transaction, self.tables, self.read_only)

    def close(self) -> None:
        if self._owned:
            self._con.close()

    @property
    def persistent(self) -> bool:
        return not self.in_memory

    # ---- reading -------------------------------------------------------------------------

    def status(self, unit: str, notion: str = "ocdp") -> BudgetStatus:
        """The budget of `unit` under `notion` (never charged and no limit: spent 0, no limit)."""
        check_unit(unit)
        check_notion(notion)
        return self._statuses("WHERE u.unit = $1 AND n.notion = $2", [unit, notion])[0]

    def statuses(self, notion: str | None = None) -> tuple[BudgetStatus, ...]:
        """The budget under each notion (or `notion`) of every unit that has a limit, a charge or a
        public mark, sorted by unit and notion."""
        if notion is not None:
            check_notion(notion)
            return tuple(self._statuses("WHERE n.notion = $1", [notion]))
        return tuple(self._statuses("", []))

    def strict(self) -> bool:
        """True once the ledger holds any limit (own or default): then a unit without one is refused."""
        rows = self.read(
            f"SELECT EXISTS (SELECT 1 FROM {self.tables.budget} WHERE limit_epsilon IS NOT NULL)"
            f" OR EXISTS (SELECT 1 FROM {self.tables.settings} WHERE system.main.starts_with(name, 'default_limit_')"
            f" AND value IS NOT NULL)", [])
        return bool(rows and rows[0][0])

    def _statuses(self, where: str, params: list[object]) -> list[BudgetStatus]:
        self._require_layout()
        if not self._exists:
            return [budget_status(params[0], params[1], None, None, 0.0, 0, False)] if len(params) == 2 else []
        query = statuses_query(self.tables, where, one_unit=bool(params) and where.startswith("WHERE u.unit"))
        return [budget_status(*row) for row in self.read(query, params)]

    def history(self, unit: str | None = None, limit: int | None = None) -> tuple[ReleaseRecord, ...]:
        """The charges of `unit` (or of every unit), oldest first; with `limit`, only the most
        recent `limit` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"history limit must be a positive integer, got {limit!r}", "pass a count ≥ 1")
        if unit is not None:
            check_unit(unit)
        query, params = history_query(self.tables.history, unit, limit)
        return tuple(ReleaseRecord(*row) for row in reversed(self.read(query, params)))

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
        check_notion(notion)
        limit = None if epsilon_limit is None else check_positive(epsilon_limit, "budget limit")
        budget = self.tables.budget

        def body(cur: duckdb.DuckDBPyConnection) -> LimitChange:
            now = utc_now()
            rows = cur.execute(f"SELECT limit_epsilon, spent_epsilon FROM {budget} WHERE unit = $1 AND notion = $2",
                               [unit, notion]).fetchall()
            previous, spent = rows[0] if rows else (None, 0.0)
            cur.execute(
                f"INSERT INTO {budget} (unit, notion, limit_epsilon, spent_epsilon, releases, created_at, updated_at)"
                " VALUES ($1, $2, $3, 0, 0, $4, $4) ON CONFLICT (unit, notion) DO UPDATE SET"
                " limit_epsilon = excluded.limit_epsilon, updated_at = excluded.updated_at",
                [unit, notion, limit, now],
            )
            return LimitChange(unit, notion, limit, previous, spent, limit is not None and not within(spent, limit))

        return self.transaction(body)

    def set_default_limit(self, epsilon_limit: float | None, notion: str = "ocdp") -> None:
        """Set (or, with None, clear) the limit that applies under `notion` to units without
        their own. While any default or own limit exists the ledger is strict."""
        self.ensure_writable()
        check_notion(notion)
        value = None if epsilon_limit is None else check_positive(epsilon_limit, "default limit")
        self.transaction(lambda cur: cur.execute(
            f"INSERT INTO {self.tables.settings} (name, value, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [f"default_limit_{notion}", value, utc_now()]))

    def set_public(self, unit: str, public: bool = True) -> None:
        """Mark `unit` public (a lookup table: never charged) or private again."""
        self.ensure_writable()
        check_unit(unit)
        self.transaction(lambda cur: cur.execute(
            f"INSERT INTO {self.tables.units} (unit, public, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (unit) DO UPDATE SET public = excluded.public, updated_at = excluded.updated_at",
            [unit, bool(public), utc_now()]))

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
        totals = self.transaction(reserve_body(self.access, names, batch, analyst))
        note_charged(math.fsum(item.epsilon for item in batch))  # what admissions kept is raised by it
        return Reservation(self.access, totals, batch, analyst)

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
        self._require_layout()
        if not self._exists:
            return []
        totals = list(consistency.mismatches(self.read(
            f"SELECT system.main.list(system.main.row(label, notion, spent, kept)) FROM"
            f" ({consistency.mismatch_sql(self.tables)})", [])[0][0]))
        checks = self.read_with(lambda cur: history_chain_steps.verify(cur, self.tables, anchors))
        if checks and not self.read_only:
            self.transaction(lambda cur: consistency.flag_for_repair(cur, self.tables))
        return totals + [d for c in checks for d in c.differences]

    def chain_heads(self) -> dict[tuple[str, str], Head]:
        """Each (unit, notion)'s chain head (link, hash): what the owner keeps outside the ledger."""
        self._require_layout()
        return self.read_with(lambda cur: history_chain_steps.heads(cur, self.tables)) if self._exists else {}

    def repair(self) -> list[consistency.Mismatch | ChainDifference]:
        """Put back every history row its chain vouches for and record the repair in each chain
        mended (`history_chain`), then reset every total from the history and lift the refusal;
        returns what differed: the entries, then the totals."""
        self.ensure_writable()

        def body(cur: duckdb.DuckDBPyConnection) -> list[consistency.Mismatch | ChainDifference]:
            entries = history_chain_steps.repair(cur, self.tables)
            return [*consistency.repair(cur, self.tables), *entries]

        found = self.transaction(body)
        self.mismatches = ()
        return list(found)

    def migrate(self, resolve: Callable[[str], Sequence[str]] | None = None) -> MigrationReport:
        """Bring a ledger in an older layout to the current one (`pcor_sql.ledger.migration`),
        then check it as on opening. `resolve(name)`: the units an old budget name spells here
        (none: it stays a unit of its own name)."""
        if self.read_only:
            raise UserError(f"database {self._label()} is read-only: its budget ledger cannot be migrated",
                            "open it read-write")
        layout = self._layout_now()
        if layout.current or layout.absent:
            return MigrationReport(changed=False)
        if layout.newer:
            raise layout.problem(self._label())  # type: ignore[misc]
        read = lambda q, p: self.read_with(lambda cur: cur.execute(q, p).fetchall())  # noqa: E731
        legacy, units_of = read_legacy(read, layout, self.database, resolve)
        report = self.transaction(lambda cur: migration_body(cur, self.tables, self.database, layout, legacy, units_of))
        self._open(self._layout_now())
        return report

    # ---- plumbing ------------------------------------------------------------------------

    def _label(self) -> str:
        return repr(self.path) if self.path else repr(self.database)

    def _require_layout(self) -> None:
        if self.layout_problem is not None:
            raise self.layout_problem

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # A DuckDB connection is not safe to use from several threads at once; making cursors
        # from it is serialised here, and each cursor is used by one call only.
        refuse_reads()  # every statement of the ledger starts here (`admission_memory.kept_only`)
        with self._cursor_lock:
            return self._con.cursor()

    def _plain(self, query: str, params: Sequence[object] = ()) -> list[tuple]:
        cur = self._cursor()  # no translation of failures: used before the ledger's label is known
        try:
            return cur.execute(query, list(params)).fetchall()
        finally:
            cur.close()

    def _location(self) -> tuple:
        rows = self._plain(LOCATION_SQL)
        if not rows:
            raise InternalError("the default database is not in duckdb_databases()")
        return rows[0]

    def _layout(self, tables: object, exact: bool = False) -> Layout:
        return Layout.from_location(tables, lambda: self._plain(COLUMNS_SQL, [self.database]), exact=exact)

    def _layout_now(self) -> Layout:
        return self._layout(self._location()[3], exact=True)

    def read(self, query: str, params: Sequence[object]) -> list[tuple]:
        """Rows of a query over the ledger's tables (empty while a read-only ledger has none)."""
        self._require_layout()
        if not self._exists:
            return []
        return self.read_with(lambda cur: cur.execute(query, list(params)).fetchall())

    def read_with(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        """`body` on a fresh cursor, outside any transaction; database failures a user can
        cause become one-line UserErrors."""
        cur = self._cursor()
        try:
            return body(cur)
        except duckdb.Error as exc:
            failure = ledger_failure(exc, self._label())
            if failure is not None:
                raise failure from None
            raise
        finally:
            cur.close()

    def transaction(self, body: Callable[[duckdb.DuckDBPyConnection], _T], *, single: bool = False,
                    beside: bool = False) -> _T:
        """Run `body` in one transaction on a fresh cursor; on a DuckDB conflict roll back and run
        it again from a fresh snapshot (bounded exponential backoff with jitter). `single`: body
        runs one statement (committed on its own: no BEGIN, no COMMIT). `beside`: the statement
        writes only rows no other writer writes (an outcome: its own reservation's history rows),
        so it runs beside this process's other write transactions, not after them (a conflict,
        should DuckDB see one, is retried like any other)."""
        if beside and single:
            return run_transaction(self._cursor, body, self._busy_timeout, self._jitter, self._label(), single=True)
        with self._write_lock:
            return run_transaction(self._cursor, body, self._busy_timeout, self._jitter, self._label(), single=single)
