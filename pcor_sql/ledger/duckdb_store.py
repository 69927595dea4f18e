"""The embedded DuckDB store (DESIGN.md §6 "Where the ledger lives", §11 "Two stores, one
contract"): the ledger in schema `pcor` of a DuckDB database — the data file itself, a ledger
file, or memory — made by sql/ledger.sql. Its SQL is in `duckdb_charges` and `duckdb_registry`;
its layouts and their migration in `layout` and `migration`; its transactions in `transactions`.

Why it cannot be overspent.
- In one process, each charge is one DuckDB transaction that reads the units' budget rows (and
  an analyst's quota row) and then writes them. DuckDB's optimistic concurrency refuses the
  second of two transactions that write one row ("Conflict on update"), or insert one key; the
  loser is rolled back and retried from a fresh snapshot, where it sees the winner's charge.
  So every committed charge was checked against every charge committed before it.
- This process's charges take turns on the write lock; those that queue on it share one
  transaction and COMMIT (`duckdb_group_commit`), each body reading what the bodies before it
  wrote — still checked against every charge before it; any failure reruns each alone.
- Across processes, DuckDB lets one process at a time open a database file read-write (a file
  lock); `connect_with_retry` waits for the lock, so processes take turns.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import duckdb

from pcor_sql.errors import InternalError, UserError
from pcor_sql.ledger import duckdb_chain, duckdb_leases, history_chain_steps
from pcor_sql.ledger.admission_memory import refuse_reads
from pcor_sql.ledger.charge_rules import Tables
from pcor_sql.ledger.duckdb_chain_memory import HeadMemory, Written
from pcor_sql.ledger.duckdb_charges import DuckDBChargeOps
from pcor_sql.ledger.duckdb_group_commit import GroupCommit
from pcor_sql.ledger.duckdb_registry import DuckDBRegistryOps
from pcor_sql.ledger.duckdb_sharing import DuckDBSharingOps
from pcor_sql.ledger.layout import COLUMNS_SQL, LOCATION_SQL, Layout
from pcor_sql.ledger.migration import MigrationReport, read_legacy
from pcor_sql.ledger.migration import migrate as migration_body
from pcor_sql.ledger.store_interface import LedgerOps, LedgerStore
from pcor_sql.ledger.transactions import ledger_failure, run_transaction
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.quoting import quote_identifier

_T = TypeVar("_T")

#: The table of a data file whose units are kept in a server ledger (DESIGN.md §11 "One data
#: file, one ledger"): one row naming that ledger. Not part of sql/ledger.sql: only a moved or
#: registered file has it.
MARKER_TABLE = "server_ledger"


def has_marker(tables: object) -> bool:
    """Whether LOCATION_SQL's list of (schema, table, column count) holds the marker table."""
    entries = [tuple(e.values()) if isinstance(e, dict) else tuple(e) for e in tables or []]  # type: ignore[union-attr]
    return ("pcor", MARKER_TABLE) in {(schema, table) for schema, table, _ in entries}


class DuckDBOps(DuckDBChargeOps, DuckDBRegistryOps, DuckDBSharingOps, LedgerOps):
    """`LedgerOps` on one DuckDB cursor."""

    def __init__(self, cur: Any, tables: Tables, written: Written | None = None):
        self.cur = cur
        self.t = tables
        #: What this transaction wrote, so the chain's appends read nothing (`duckdb_chain_memory`);
        #: None outside the store's transactions (reads, a migration): everything is read.
        self.written = written

    # ---- the history's hash chain and the reservations' leases (DESIGN.md §11) ---------------

    def chain_rows(self, ids):
        return duckdb_chain.chain_rows(self.cur, self.t, ids, self.written)

    def chain_all(self):
        return duckdb_chain.chain_all(self.cur, self.t)

    def chain_heads(self):
        return duckdb_chain.chain_heads(self.cur, self.t)

    def chain_append(self, entries, heads, stored, now):
        duckdb_chain.chain_append(self.cur, self.t, entries, heads, stored, now, self.written)

    def chain_put_back(self, rows, present, drop):
        duckdb_chain.chain_put_back(self.cur, self.t, rows, present, drop, self.written)

    def renew_lease(self, holder, seconds):
        duckdb_leases.renew_lease(self.cur, self.t, holder, seconds)

    def end_lease(self, holder):
        duckdb_leases.end_lease(self.cur, self.t, holder)

    def lapsed_leases(self):
        return duckdb_leases.lapsed_leases(self.cur, self.t)

    def interrupt_unleased(self, now):
        if self.written is not None:
            self.written.forget_rows()
        return duckdb_leases.interrupt_unleased(self.cur, self.t, now)


class DuckDBStore(LedgerStore):
    """The ledger in schema `pcor` of database `database` of `con` (default: the connection's
    default database, read on a fresh cursor, so a `USE` by the caller cannot move it).

    Every operation runs on a private cursor of `con`, naming the ledger's tables in full, so
    the caller's open transaction, half-read result or later `USE` is never touched, and a
    charge is committed on its own. `owned`: the store made `con` for itself (a ledger file)
    and closes it in `close()`. `location`: the row of `LOCATION_SQL` if the caller read it."""

    kind = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection, *, busy_timeout: float, owned: bool = False,
                 location: Sequence[object] | None = None):
        self._con = con
        self._owned = owned
        self._busy_timeout = busy_timeout
        self._cursor_lock = threading.Lock()
        # One write transaction at a time from this process: threads sharing the ledger (the
        # service's workers) would otherwise collide on the same budget rows, and each collision
        # costs a whole transaction again plus a backoff sleep (measured: 15 conflicts for 24
        # requests from 2 threads; throughput flat from 4 workers on). Other processes on the
        # same ledger (DuckDB files admit one writer process; in-memory ledgers are private)
        # still meet the retry loop.
        self._write_lock = threading.RLock()
        # Each chain's head as this process committed it (DESIGN.md §11: one writer process a file).
        self._heads = HeadMemory()
        # The write transactions that queue on the lock commit together (DESIGN.md §11;
        # `duckdb_group_commit`): one COMMIT for what waited, not one each.
        self._group = GroupCommit(self._write_lock, self._heads, self._cursor,
                                  lambda body, committed: self._run(body, committed=committed))
        # Jitter for retry sleeps only (spreads colliding writers apart); it never touches a
        # release, so it need not come from the release's randomness source.
        self._jitter = random.Random()
        database, path, read_only, tables = location or self._location()
        self.database: str = database
        self.path = path or None
        self.read_only = bool(read_only)
        self.tables = Tables(f"{quote_identifier(database)}.pcor.")
        self.marker = has_marker(tables)
        self._open(self._layout(tables))

    def _open(self, layout: Layout) -> None:
        if self.marker:  # DESIGN.md §11 "One data file, one ledger": never this file's embedded ledger
            found = read_marker(self._con, self.database)
            where = found[1] if found else "a PostgreSQL ledger"
            self._problem = UserError(f"the units of {self.label()} are kept in the PostgreSQL ledger {where}, not in the file",
                                      f"give that ledger: --ledger {where} (ledger='{where}' in Python)")
            self.exists = False
            return
        self._problem = layout.problem(self.label())
        self.exists = layout.current
        if layout.absent and not self.read_only:
            # Two cursors creating the tables at once is a catalog conflict: retried like a charge.
            use = f"USE {quote_identifier(self.database)}"
            self._run(lambda cur: (cur.execute(use), cur.execute(sql_text("ledger.sql"))))
            self.exists = True
        if self.exists and not self.read_only:
            self._ensure_release_index()

    def _ensure_release_index(self) -> None:
        """The history's index on release_id (sql/ledger.sql), made once for a ledger from before it."""
        found = self._plain("SELECT count(*) FROM system.main.duckdb_indexes() WHERE database_name = $1 AND schema_name = 'pcor'"
                            " AND index_name = 'history_release_id'", [self.database])
        if not found[0][0]:
            self._run(lambda cur: cur.execute(
                f"CREATE INDEX IF NOT EXISTS history_release_id ON {self.tables.history} (release_id)"))

    def label(self) -> str:
        return repr(self.path) if self.path else repr(self.database)

    def layout_problem(self) -> Exception | None:
        return self._problem

    def close(self) -> None:
        if self._owned:
            self._con.close()

    # ---- transactions -------------------------------------------------------------------------

    def transaction(self, body: Callable[[LedgerOps], _T], *, single: bool = False, beside: bool = False) -> _T:
        """(See LedgerStore.) On a DuckDB conflict roll back and run it again from a fresh
        snapshot (bounded exponential backoff with jitter). `single`: one statement, committed
        on its own (no BEGIN, no COMMIT). `beside`: it writes only rows no other writer writes
        (an outcome: its own reservation's history rows), so it runs beside this process's
        other write transactions, not after them (a conflict, should DuckDB see one, is retried).
        The others (neither) may share one transaction and COMMIT with those that queued with
        them on the write lock (`duckdb_group_commit`), each with its own result."""
        tables, memory = self.tables, self._heads
        attempts: list[Written] = []

        def attempt(cur: Any, heads: HeadMemory = memory) -> _T:
            # `heads`: the process's memory, or a group's view of it (`duckdb_group_commit`).
            if attempts:  # a retry (a conflict, perhaps with what was kept): read everything afresh
                memory.clear()
            attempts.append(Written(heads))
            try:
                return body(DuckDBOps(cur, tables, attempts[-1]))
            except BaseException:
                heads.clear()
                raise

        committed = lambda locked: memory.committed(attempts[-1], locked)
        if not single and not beside:
            return self._group.run(attempt, committed, lambda: attempts[-1])
        return self._run(attempt, single=single, beside=beside, committed=committed)

    def _run(self, body: Callable[[Any], _T], *, single: bool = False, beside: bool = False,
             committed: Callable[[bool], None] | None = None) -> _T:
        if beside and single:
            result = run_transaction(self._cursor, body, self._busy_timeout, self._jitter, self.label(), single=True)
            if committed is not None:
                committed(False)
            return result
        with self._write_lock:
            try:
                result = run_transaction(self._cursor, body, self._busy_timeout, self._jitter, self.label(),
                                         single=single)
            except BaseException:
                self._heads.clear()
                raise
            if committed is not None:
                committed(True)
            else:  # a body of its own (tables made, a migration): what it wrote is not kept
                self._heads.clear()
            return result

    def read(self, body: Callable[[LedgerOps], _T]) -> _T:
        """`body` on a fresh cursor, outside any transaction; database failures a user can
        cause become one-line UserErrors."""
        cur = self._cursor()
        try:
            return body(DuckDBOps(cur, self.tables))
        except duckdb.Error as exc:
            failure = ledger_failure(exc, self.label())
            if failure is not None:
                raise failure from None
            raise
        finally:
            cur.close()

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

    # ---- layouts ------------------------------------------------------------------------------

    def _location(self) -> tuple:
        rows = self._plain(LOCATION_SQL)
        if not rows:
            raise InternalError("the default database is not in duckdb_databases()")
        return rows[0]

    def _layout(self, tables: object, exact: bool = False) -> Layout:
        return Layout.from_location(tables, lambda: self._plain(COLUMNS_SQL, [self.database]), exact=exact)

    def _layout_now(self) -> Layout:
        return self._layout(self._location()[3], exact=True)

    def reopen(self) -> None:
        self._open(self._layout_now())

    def migrate(self, resolve: Callable[[str], Sequence[str]] | None) -> MigrationReport:
        """Bring a ledger in an older layout to the current one (`pcor_sql.ledger.migration`).
        `resolve(name)`: the units an old budget name spells here (none: a unit of its own name)."""
        if self.read_only:
            raise UserError(f"database {self.label()} is read-only: its budget ledger cannot be migrated",
                            "open it read-write")
        layout = self._layout_now()
        if layout.current or layout.absent:
            return MigrationReport(changed=False)
        if layout.newer:
            raise layout.problem(self.label())  # type: ignore[misc]
        read = lambda q, p: self._plain(q, p)  # noqa: E731
        legacy, units_of = read_legacy(read, layout, self.database, resolve)
        def body(cur: Any) -> MigrationReport:
            report = migration_body(cur, self.tables, self.database, layout, legacy, units_of)
            # DESIGN.md §11: a history from before the chain gets its chain, in the same transaction.
            return dataclasses.replace(report, chained=history_chain_steps.build_missing(DuckDBOps(cur, self.tables)))

        report = self._run(body)
        self.reopen()
        return report

    def write_marker(self, ledger_id: str, url: str, now: Any) -> None:
        """Name the server ledger that keeps this file's units (DESIGN.md §11)."""
        write_marker(self._run, self.database, ledger_id, url, now)
        self.marker = True


def _marker_table(database: str) -> str:
    return f"{quote_identifier(database)}.pcor.{MARKER_TABLE}"


def read_marker(con: duckdb.DuckDBPyConnection, database: str) -> tuple[str, str] | None:
    """(ledger id, URL without password) of the server ledger a data file's marker names."""
    cur = con.cursor()
    try:
        rows = cur.execute(f"SELECT ledger_id, url FROM {_marker_table(database)} LIMIT 1").fetchall()
    finally:
        cur.close()
    return (rows[0][0], rows[0][1]) if rows else None


def write_marker(run: Callable[[Callable[[Any], Any]], Any], database: str, ledger_id: str, url: str, now: Any) -> None:
    """Write a data file's marker (one row) in one transaction run by `run(body)`."""
    table = _marker_table(database)

    def body(cur: Any) -> None:
        cur.execute(f"USE {quote_identifier(database)}")
        cur.execute("CREATE SCHEMA IF NOT EXISTS pcor")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (ledger_id VARCHAR NOT NULL, url VARCHAR NOT NULL,"
                    " moved_at TIMESTAMP NOT NULL)")
        cur.execute(f"DELETE FROM {table}")
        cur.execute(f"INSERT INTO {table} VALUES ($1, $2, $3)", [ledger_id, url, now])

    run(body)


def mark_file(con: duckdb.DuckDBPyConnection, database: str, ledger_id: str, url: str, now: Any) -> None:
    """`write_marker` on a connection of the data file (its own short transaction)."""
    def run(body: Callable[[Any], Any]) -> Any:
        return run_transaction(con.cursor, body, 10.0, random.Random(), repr(database))

    write_marker(run, database, ledger_id, url, now)


def pcor_tables(tables: object) -> set[str]:
    """The `pcor` tables in LOCATION_SQL's list of (schema, table, column count), and a pre-`pcor`
    ledger's as `legacy:<name>`."""
    entries = [tuple(e.values()) if isinstance(e, dict) else tuple(e) for e in tables or []]  # type: ignore[union-attr]
    return {table if schema == "pcor" else f"legacy:{table}" for schema, table, _ in entries}
