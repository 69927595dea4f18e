"""The privacy budget ledger (DESIGN.md §6 "Trust model").

Every release and anomaly answer is charged, before it is shown, to each privacy unit (base
table or file) its relation reads, under its privacy notion (OCDP, ε-DP, (ε, k)-SP), in a
ledger kept in schema `pcor` of the database that holds the data (tables made by
`sql/ledger.sql`). Per unit and notion: the spent ε, an optional limit, the history. A charge
that would take any unit past its limit — or, in a ledger that holds any limit, a charge on a
unit that has none — is refused and writes nothing. Where the ledger lives is decided by
`ledger.location.open_ledger`.

Why the ledger composes correctly. Releases reading one unit compose sequentially: k releases
that are ε_1, …, ε_k-DP (here: OCDP, or ε-DP, or (ε_j, k)-SP with the same neighbour relation)
are together (Σ ε_j)-private under that relation (Dwork–Roth 2014, Thm 3.16; the OCDP and SP
arguments are the same product of per-release likelihood ratios). A release reading several
units changes by at most its ε when one unit's data changes, so charging it in full to each
unit keeps each unit's total a valid bound. The notions hold under different neighbour
relations, so their totals are never added. The ledger reads only ε values, never the data.

Why it cannot be overspent.
- In one process, each charge is one DuckDB transaction that reads the units' budget rows and
  then writes them. DuckDB's optimistic concurrency refuses the second of two transactions that
  write one row ("Conflict on update"), or insert one key; the loser is rolled back and retried
  from a fresh snapshot, where it sees the winner's charge. So every committed charge was
  checked against every charge committed before it.
- Across processes, DuckDB lets one process at a time open a database file read-write (a file
  lock); `connect_with_retry` waits for the lock, so processes take turns.
- A charge carries a `release_id` chosen before the release is computed; the history's primary
  key makes a repeated charge of one release a no-op, so nothing is charged twice.
"""

from __future__ import annotations

import math
import numbers
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import duckdb

from pcor_sql.ledger.charge_rules import (
    NOTIONS,
    TOLERANCE,
    ChargeItem,
    Tables,
    check_item,
    check_limits,
    check_notion,
    check_positive,
    check_unit,
    is_conflict,
    read_state,
    rollback_quietly,
    utc_now,
)
from pcor_sql.ledger.pending import COSTS, PendingCharge, unit_names
from pcor_sql.ledger.records import BudgetStatus, LimitChange, ReleaseRecord, budget_status, new_release_id
from pcor_sql.errors import InternalError, UserError, warn_privacy
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.quoting import quote_identifier

__all__ = ["BudgetStatus", "ChargeItem", "Ledger", "LimitChange", "PendingCharge", "ReleaseRecord",
           "new_release_id", "NOTIONS", "TOLERANCE"]

IN_MEMORY_WARNING = (
    "the budget ledger is in memory and is lost when the process ends — keep it in a file:"
    " ledger='FILE' in Python, --ledger FILE (or --db FILE) on the CLI"
)

_T = TypeVar("_T")

#: Where a connection's ledger lives when it is kept with the data: the connection's default
#: database (a fresh cursor starts there whatever `USE` did), its file, whether it is
#: read-only, and whether the ledger's tables exist.
LOCATION_SQL = (
    "SELECT d.database_name, d.path, d.readonly, (SELECT count(*) FROM duckdb_tables() t"
    " WHERE t.database_name = d.database_name AND t.schema_name = 'pcor'"
    " AND t.table_name IN ('budget', 'units', 'settings', 'history', 'datasets'))"
    " FROM duckdb_databases() d WHERE d.database_name = current_database()"
)
_TABLES = 5


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
    `LOCATION_SQL` if the caller read it already.
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
        # Jitter for retry sleeps only (spreads colliding writers apart); it never touches a
        # release, so it need not come from the release's randomness source.
        self._jitter = random.Random()
        if location is None:
            rows = self._read_fresh(LOCATION_SQL)
            if not rows:
                raise InternalError("the default database is not in duckdb_databases()")
            location = rows[0]
        database, path, read_only, tables = location
        self.database: str = database
        self.path: str | None = path or None
        self.in_memory: bool = self.path is None
        self.read_only: bool = bool(read_only)
        self.tables = Tables(f"{quote_identifier(database)}.pcor.")
        self._exists = tables == _TABLES
        if self.in_memory:
            warn_privacy(IN_MEMORY_WARNING, warn, stacklevel=4)
        if not self.read_only and not self._exists:
            # Two cursors creating the tables at once is a catalog conflict: retried like a charge.
            use = f"USE {quote_identifier(database)}"
            self.transaction(lambda cur: (cur.execute(use), cur.execute(sql_text("ledger.sql"))))
            self._exists = True

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
        found = [s for s in self._statuses("WHERE u.unit = $1 AND n.notion = $2", [unit, notion])]
        return found[0]

    def statuses(self, notion: str | None = None) -> tuple[BudgetStatus, ...]:
        """The budget under each notion (or `notion`) of every unit that has a limit, a charge or a
        public mark, sorted by unit and notion."""
        if notion is not None:
            check_notion(notion)
            return tuple(self._statuses("WHERE n.notion = $1", [notion]))
        return tuple(self._statuses("", []))

    def default_limits(self) -> dict[str, float]:
        """The default limit of each notion that has one."""
        rows = self.read(f"SELECT name, value FROM {self.tables.settings} WHERE name LIKE 'default_limit_%'"
                         " AND value IS NOT NULL", [])
        return {name.removeprefix("default_limit_"): value for name, value in rows}

    def strict(self) -> bool:
        """True once the ledger holds any limit (own or default): then a unit without one is refused."""
        rows = self.read(
            f"SELECT (SELECT count(*) FROM {self.tables.budget} WHERE limit_epsilon IS NOT NULL)"
            f" + (SELECT count(*) FROM {self.tables.settings} WHERE name LIKE 'default_limit_%' AND value IS NOT NULL)", [])
        return bool(rows and rows[0][0])

    def _statuses(self, where: str, params: list[object]) -> list[BudgetStatus]:
        t = self.tables
        units = f"SELECT unit FROM {t.budget} UNION SELECT unit FROM {t.units}"
        if params and where.startswith("WHERE u.unit"):
            units = "SELECT $1 AS unit"
        query = (
            f"SELECT u.unit, n.notion, b.limit_epsilon, (SELECT value FROM {t.settings} s"
            f" WHERE s.name = 'default_limit_' || n.notion), coalesce(b.spent_epsilon, 0), coalesce(b.releases, 0),"
            f" coalesce(p.public, false) FROM ({units}) u CROSS JOIN (SELECT unnest({list(NOTIONS)!r}) AS notion) n"
            f" LEFT JOIN {t.budget} b ON b.unit = u.unit AND b.notion = n.notion"
            f" LEFT JOIN {t.units} p ON p.unit = u.unit {where} ORDER BY u.unit, n.notion"
        )
        if not self._exists:
            return [budget_status(params[0], params[1], None, None, 0.0, 0, False)] if len(params) == 2 else []
        return [budget_status(*row) for row in self.read(query, params)]

    def history(self, unit: str | None = None, limit: int | None = None) -> tuple[ReleaseRecord, ...]:
        """The charges of `unit` (or of every unit), oldest first; with `limit`, only the most
        recent `limit` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"history limit must be a positive integer, got {limit!r}", "pass a count ≥ 1")
        query = (
            "SELECT release_id, unit, notion, seq, released_at, mechanism, epsilon, k, record_key, statement,"
            f" spent_after, seeded, role, dataset FROM {self.tables.history}"
        )
        params: list[object] = []
        if unit is None:
            query += " ORDER BY released_at DESC, unit DESC, notion DESC, seq DESC"
        else:
            check_unit(unit)
            query += " WHERE unit = $1 ORDER BY released_at DESC, notion DESC, seq DESC"
            params.append(unit)
        if limit is not None:
            query += f" LIMIT ${len(params) + 1}"
            params.append(limit)
        return tuple(ReleaseRecord(*row) for row in reversed(self.read(query, params)))

    # ---- writing -------------------------------------------------------------------------

    def ensure_writable(self) -> None:
        """Raise a UserError if the ledger cannot be charged (the database is read-only).
        Call it before computing a release, so no work is done that could not be paid for."""
        if self.read_only:
            raise UserError(
                f"database {self._label()} is read-only: the budget ledger cannot be charged",
                "open it read-write",
            )

    def set_limit(self, unit: str, epsilon_limit: float, notion: str = "ocdp") -> LimitChange:
        """Set the ε limit of `unit` under `notion` (finite, > 0). A limit below the ε already
        spent is allowed and reported through `LimitChange.below_spent`."""
        self.ensure_writable()
        check_unit(unit)
        check_notion(notion)
        limit = check_positive(epsilon_limit, "budget limit")
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
            return LimitChange(unit, notion, limit, previous, spent, spent > limit + TOLERANCE)

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

    def precheck(self, units: str | Sequence[str], epsilon: float, notion: str = "ocdp") -> None:
        """Refuse early: raise UserError if the ledger cannot be charged, BudgetExceeded/Refused if
        a charge of `epsilon` under `notion` would not fit every unit now. Passing is no
        reservation — a charge checks again atomically."""
        self.ensure_writable()
        check_notion(notion)
        cost = COSTS[notion](check_positive(epsilon, "ε"))
        names = unit_names(units)
        cur = self._cursor()
        try:
            state = read_state(cur, self.tables, names, notion, []) if self._exists else None
        finally:
            cur.close()
        if state is not None:
            check_limits(state, [ChargeItem("precheck", cost, "precheck")])

    def charge(self, units: str | Sequence[str], cost: object, *, mechanism: str, record_key: str | None = None,
               statement: str | None = None, release_id: str, seeded: bool = False) -> float:
        """Charge one release of typed `cost` to every unit in `units`; return the smallest
        headroom's unit total afterwards (see `charge_many`)."""
        item = ChargeItem(release_id, cost, mechanism, record_key, statement, seeded)
        return self.charge_many(units, [item])

    def charge_many(self, units: str | Sequence[str], items: Iterable[ChargeItem]) -> float:
        """Charge several releases to every unit in `units` in one transaction, all or nothing,
        and return the largest total spent among the units afterwards. Their ε add up
        (sequential composition); the whole batch is refused if any unit would pass its limit.
        Items whose release_id is already in the history are skipped (already paid for)."""
        with self.open_charge(units, items) as pending:
            return pending.commit().spent

    def open_charge(self, units: str | Sequence[str], items: Iterable[ChargeItem]) -> "PendingCharge":
        """Begin charging `items` to `units`: the transaction opens and the limits are checked
        now (refused now, nothing written), the write waits for `commit()` — so the caller's
        work can run between an early refusal and the charge, inside one ledger transaction.
        Use it as a context manager: leaving the block without `commit()` charges nothing."""
        self.ensure_writable()
        names = unit_names(units)
        batch = tuple(items)
        for item in batch:
            check_item(item)
        if len({item.notion for item in batch}) > 1:
            raise InternalError("one batch of charges mixes privacy notions")
        ids = [item.release_id for item in batch]
        if len(set(ids)) != len(ids):
            raise InternalError("one batch of charges repeats a release_id")
        return PendingCharge(self, names, batch)

    # ---- plumbing ------------------------------------------------------------------------

    def _label(self) -> str:
        return repr(self.path) if self.path else repr(self.database)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # A DuckDB connection is not safe to use from several threads at once; making cursors
        # from it is serialised here, and each cursor is used by one call only.
        with self._cursor_lock:
            return self._con.cursor()

    def _read_fresh(self, query: str) -> list[tuple]:
        cur = self._cursor()
        try:
            return cur.execute(query).fetchall()
        finally:
            cur.close()

    def read(self, query: str, params: Sequence[object]) -> list[tuple]:
        """Rows of a query over the ledger's tables (empty while a read-only ledger has none)."""
        if not self._exists:
            return []
        cur = self._cursor()
        try:
            return cur.execute(query, list(params)).fetchall()
        finally:
            cur.close()

    def transaction(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        """Run `body` in one transaction on a fresh cursor; on a DuckDB conflict roll back and run
        it again from a fresh snapshot (bounded exponential backoff with jitter)."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.001
        while True:
            cur = self._cursor()
            try:
                cur.execute("BEGIN TRANSACTION")
                result = body(cur)
                cur.execute("COMMIT")
                return result
            except BaseException as exc:
                rollback_quietly(cur)
                if not is_conflict(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise UserError(
                        f"the budget ledger of database {self._label()} stayed busy for "
                        f"{self._busy_timeout:g} s (other charges kept conflicting)",
                        "retry the release",
                    ) from None
            finally:
                cur.close()
            time.sleep(min(delay * (0.5 + self._jitter.random()), max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.05)


