"""The privacy budget ledger (DESIGN.md §2 "Budget ledger").

Every release is charged, before it is shown, to a ledger kept in the DuckDB database in use
(tables created by `sql/ledger.sql`): per dataset the spent ε, an optional limit, and the history
of releases. A charge that would take a dataset past its limit is refused and writes nothing.

Why the ledger composes correctly. Releases of one dataset compose sequentially: k releases
that are ε_1, …, ε_k-DP (here: OCDP) are together (Σ ε_j)-DP (Dwork–Roth 2014, Thm 3.16; the
OCDP argument is the same product of per-release likelihood ratios). So the spent ε of a dataset
is the sum of the ε of its charged releases, and refusing any charge with spent + ε > limit keeps
the whole history within the limit. The ledger itself reads only ε values, never the data, so
keeping it costs nothing.

Why it cannot be overspent.
- In one process, each charge is one DuckDB transaction that reads the dataset's budget row and
  then writes it. DuckDB's optimistic concurrency refuses the second of two transactions that
  write one row ("Conflict on update"), or insert one key; the loser is rolled back and retried
  from a fresh snapshot, where it sees the winner's charge. So every committed charge was checked
  against every charge committed before it.
- Across processes, DuckDB lets one process at a time open a database file read-write (a file
  lock); `connect_with_retry` waits for the lock, so processes take turns and each charge reads
  the spent ε its predecessors committed.
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
from typing import TypeVar, overload

import duckdb

from pcor_sql.engine.ledger_charge import (
    TOLERANCE,
    BudgetStatus,
    ChargeItem,
    LimitChange,
    ReleaseRecord,
    budget_status,
    check_dataset,
    new_release_id,
    Tables,
    check_item,
    check_limit,
    check_positive,
    fresh_items,
    is_conflict,
    read_budget,
    refusal,
    rollback_quietly,
    utc_now,
    write_charge,
)
from pcor_sql.errors import InternalError, UserError
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.quoting import quote_identifier

__all__ = ["BudgetStatus", "ChargeItem", "Ledger", "LimitChange", "PendingCharge", "ReleaseRecord",
           "new_release_id", "TOLERANCE"]

IN_MEMORY_WARNING = (
    "the budget ledger is in memory and is lost when the process ends — use --db FILE to keep it"
)

_T = TypeVar("_T")

#: One catalog read: where the ledger lives (the database and schema `con` is using), its file
#: (None in memory), whether it is read-only, and whether its two tables exist.
LOCATION_SQL = (
    "SELECT d.database_name, current_schema(), d.path, d.readonly, (SELECT count(*) FROM duckdb_tables() t"
    " WHERE t.database_name = d.database_name AND t.schema_name = current_schema()"
    " AND t.table_name IN ('pcor_budget', 'pcor_release_history'))"
    " FROM duckdb_databases() d WHERE d.database_name = current_database()"
)


class Ledger:
    """The budget ledger of the database `con` is using (its current database and schema).

    Every operation runs on a private cursor of `con`, naming the ledger's tables in full, so
    the caller's open transaction, half-read result or later `USE` is never touched, and a
    charge is committed on its own. Safe to share between threads. `warn(message)` receives the
    in-memory warning, once per Ledger (so make one per session, not one per release).
    `busy_timeout` bounds, in seconds, how long a charge retries on transaction conflicts.
    `location` is the row of `LOCATION_SQL` if the caller read it already (in the same
    statement as other catalog facts: one round trip fewer per release).
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        warn: Callable[[str], None] | None = None,
        busy_timeout: float = 10.0,
        location: Sequence[object] | None = None,
    ):
        if not (isinstance(busy_timeout, numbers.Real) and math.isfinite(busy_timeout) and busy_timeout >= 0):
            raise InternalError(f"busy_timeout must be a finite number ≥ 0, got {busy_timeout!r}")
        self._con = con
        self._busy_timeout = float(busy_timeout)
        self._cursor_lock = threading.Lock()
        # Jitter for retry sleeps only (spreads colliding writers apart); it never touches a
        # release, so it need not come from the release's randomness source.
        self._jitter = random.Random()
        if location is None:
            rows = con.execute(LOCATION_SQL).fetchall()
            if not rows:
                raise InternalError("the current database is not in duckdb_databases()")
            location = rows[0]
        database, schema, path, read_only, tables = location
        self.database: str = database
        self.schema: str = schema
        self.path: str | None = path or None
        self.in_memory: bool = self.path is None
        self.read_only: bool = bool(read_only)
        prefix = f"{quote_identifier(database)}.{quote_identifier(schema)}."
        self._tables = Tables(prefix + "pcor_budget", prefix + "pcor_release_history")
        self._exists = tables == 2
        if self.in_memory and warn is not None:
            warn(IN_MEMORY_WARNING)
        if not self.read_only and not self._exists:
            # Two cursors creating the tables at once is a catalog conflict: retried like a charge.
            use = f"USE {prefix.rstrip('.')}"
            self._transaction(lambda cur: (cur.execute(use), cur.execute(sql_text("ledger.sql"))))
            self._exists = True

    # ---- reading -------------------------------------------------------------------------

    @overload
    def status(self, dataset: str) -> BudgetStatus: ...

    @overload
    def status(self, dataset: None = None) -> tuple[BudgetStatus, ...]: ...

    def status(self, dataset: str | None = None) -> BudgetStatus | tuple[BudgetStatus, ...]:
        """The budget of `dataset` (a dataset never charged and without a limit: spent 0, no limit),
        or of every dataset in the ledger, sorted by name."""
        query = f"SELECT dataset, limit_epsilon, spent_epsilon, releases FROM {self._tables.budget}"
        if dataset is None:
            return tuple(budget_status(*row) for row in self._read(query + " ORDER BY dataset", []))
        check_dataset(dataset)
        rows = self._read(query + " WHERE dataset = $1", [dataset])
        return budget_status(*rows[0]) if rows else BudgetStatus(dataset, None, 0.0, None, 0)

    def history(self, dataset: str | None = None, limit: int | None = None) -> tuple[ReleaseRecord, ...]:
        """The charged releases of `dataset` (or of every dataset), oldest first; with `limit`,
        only the most recent `limit` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"history limit must be a positive integer, got {limit!r}", "pass a count ≥ 1")
        query = (
            "SELECT release_id, dataset, seq, released_at, mechanism, epsilon, record_key, statement,"
            f" spent_after FROM {self._tables.history}"
        )
        params: list[object] = []
        if dataset is None:
            query += " ORDER BY released_at DESC, dataset DESC, seq DESC"
        else:
            check_dataset(dataset)
            query += " WHERE dataset = $1 ORDER BY seq DESC"
            params.append(dataset)
        if limit is not None:
            query += f" LIMIT ${len(params) + 1}"
            params.append(limit)
        rows = self._read(query, params)
        return tuple(ReleaseRecord(*row) for row in reversed(rows))

    # ---- writing -------------------------------------------------------------------------

    def ensure_writable(self) -> None:
        """Raise a UserError if the ledger cannot be charged (the database is read-only).
        Call it before computing a release, so no work is done that could not be paid for."""
        if self.read_only:
            raise UserError(
                f"database {self._label()} is read-only: the budget ledger cannot be charged",
                "open it read-write",
            )

    def set_limit(self, dataset: str, epsilon_limit: float) -> LimitChange:
        """Set the ε limit of `dataset` (finite, > 0). A limit below the ε already spent is
        allowed and reported through `LimitChange.below_spent`."""
        self.ensure_writable()
        check_dataset(dataset)
        limit = check_positive(epsilon_limit, "budget limit")
        budget = self._tables.budget

        def body(cur: duckdb.DuckDBPyConnection) -> LimitChange:
            now = utc_now()
            rows = cur.execute(f"SELECT limit_epsilon, spent_epsilon FROM {budget} WHERE dataset = $1", [dataset]).fetchall()
            previous, spent = rows[0] if rows else (None, 0.0)
            cur.execute(
                f"INSERT INTO {budget} (dataset, limit_epsilon, spent_epsilon, releases, created_at, updated_at)"
                " VALUES ($1, $2, 0, 0, $3, $3) ON CONFLICT (dataset) DO UPDATE SET"
                " limit_epsilon = excluded.limit_epsilon, updated_at = excluded.updated_at",
                [dataset, limit, now],
            )
            return LimitChange(dataset, limit, previous, spent, spent > limit + TOLERANCE)

        return self._transaction(body)

    def precheck(self, dataset: str, epsilon: float) -> BudgetStatus:
        """Refuse early: raise UserError if the ledger cannot be charged, BudgetExceeded if a
        release costing `epsilon` would not fit the dataset's limit now. Passing is no
        reservation — `charge` checks again atomically."""
        self.ensure_writable()
        check_dataset(dataset)
        eps = check_positive(epsilon, "ε")
        current = self.status(dataset)
        if current.limit is not None and current.spent + eps > current.limit + TOLERANCE:
            raise refusal(dataset, current.limit, current.spent, eps, 1)
        return current

    def charge(
        self,
        dataset: str,
        cost: object,
        *,
        mechanism: str,
        record_key: str | None = None,
        statement: str | None = None,
        release_id: str,
    ) -> float:
        """Charge one release of typed `cost` to `dataset` and return the dataset's total spent ε
        afterwards. Atomic; refused with BudgetExceeded (nothing written) if it would exceed the
        limit; a release_id already charged is not charged again (the current total is returned)."""
        return self.charge_many(dataset, [ChargeItem(release_id, cost, mechanism, record_key, statement)])

    def charge_many(self, dataset: str, items: Iterable[ChargeItem]) -> float:
        """Charge several releases to `dataset` in one transaction, all or nothing, and return the
        dataset's total spent ε afterwards. Their ε add up (sequential composition), and the
        whole batch is refused if the sum would exceed the limit. Items whose release_id is
        already in the history are skipped (already paid for)."""
        with self.open_charge(dataset, items) as pending:
            return pending.commit().spent

    def open_charge(self, dataset: str, items: Iterable[ChargeItem]) -> "PendingCharge":
        """Begin charging `items`: the transaction opens and the limit is checked now
        (BudgetExceeded now, nothing written), the write waits for `commit()` — so the caller's
        work runs between an early refusal and the charge, inside one ledger transaction.
        Use it as a context manager: leaving the block without `commit()` charges nothing."""
        self.ensure_writable()
        check_dataset(dataset)
        batch = tuple(items)
        for item in batch:
            check_item(item)
        ids = [item.release_id for item in batch]
        if len(set(ids)) != len(ids):
            raise InternalError("one batch of charges repeats a release_id")
        return PendingCharge(self, dataset, batch)

    # ---- plumbing ------------------------------------------------------------------------

    def _label(self) -> str:
        return repr(self.path) if self.path else repr(self.database)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # A DuckDB connection is not safe to use from several threads at once; making cursors
        # from it is serialised here, and each cursor is used by one call only.
        with self._cursor_lock:
            return self._con.cursor()

    def _read(self, query: str, params: Sequence[object]) -> list[tuple]:
        if not self._exists:
            return []  # a read-only database that was never charged has an empty ledger
        cur = self._cursor()
        try:
            return cur.execute(query, list(params)).fetchall()
        finally:
            cur.close()

    def _transaction(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
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


class PendingCharge:
    """A charge between its check and its write (see `Ledger.open_charge`). `limit` and
    `spent` are what the check read; after `commit()`, `spent` is the total afterwards."""

    def __init__(self, ledger: Ledger, dataset: str, batch: tuple[ChargeItem, ...]):
        self._ledger, self._dataset, self._batch = ledger, dataset, batch
        self._cur: duckdb.DuckDBPyConnection | None = ledger._cursor()
        try:
            self._cur.execute("BEGIN TRANSACTION")
            self._row = read_budget(self._cur, ledger._tables, dataset, [item.release_id for item in batch])
            check_limit(self._row, dataset, fresh_items(self._row, dataset, batch))
        except BaseException:
            self.close()
            raise
        self.limit: float | None = self._row.limit
        self.spent: float = self._row.spent

    def commit(self) -> "PendingCharge":
        """Write the charge. If another writer committed to the same budget meanwhile, DuckDB
        refuses this write; the charge then runs again from a fresh snapshot (re-checking the
        limit, so BudgetExceeded is still possible)."""
        if self._cur is None:
            raise InternalError("a pending charge was committed twice or after it was closed")
        try:
            self.spent = self._write(self._cur, self._row)
            self._cur.execute("COMMIT")
        except BaseException as exc:
            self.close()
            if not is_conflict(exc):
                raise
            self.spent = self._ledger._transaction(lambda cur: self._again(cur))
        else:
            self._cur.close()
            self._cur = None
        return self

    def _again(self, cur: duckdb.DuckDBPyConnection) -> float:
        row = read_budget(cur, self._ledger._tables, self._dataset, [item.release_id for item in self._batch])
        self.limit = row.limit
        return self._write(cur, row)

    def _write(self, cur: duckdb.DuckDBPyConnection, row: object) -> float:
        fresh = fresh_items(row, self._dataset, self._batch)
        running, total, residual = check_limit(row, self._dataset, fresh)
        if fresh:
            write_charge(cur, self._ledger._tables, self._dataset, row, fresh, running, total, residual)
        return total if fresh else row.spent

    def close(self) -> None:
        """Roll back whatever was not committed and give the cursor back (idempotent)."""
        if self._cur is not None:
            rollback_quietly(self._cur)
            self._cur.close()
            self._cur = None

    def __enter__(self) -> "PendingCharge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
