"""The PostgreSQL store (DESIGN.md §11 "Two stores, one contract", "Several services, one
ledger"): the ledger in schema `pcor` of a PostgreSQL database named by a libpq URL
(`postgresql://user@host:port/db`), made by sql/ledger_postgres.sql; its SQL is in
`postgres_ops` and `postgres_registry`. Needs psycopg 3 (the `postgres` extra).

Why several processes sharing it never overspend: every write runs in a SERIALIZABLE
transaction, and a charge reads the very budget and quota rows it then writes. PostgreSQL
refuses to commit a transaction whose reads another committed transaction changed (SQLSTATE
40001, serialization failure; 40P01 for a deadlock), so of two concurrent charges of one unit or
one analyst one is refused and run again from a fresh snapshot, where it sees the other's spend:
every committed charge was checked against every charge committed before it, on any host. Those
failures are told apart by psycopg's error classes (their SQLSTATEs), never by message text.

Connections: one per concurrent caller (a small pool), each used by one transaction or read at
a time; reads outside a transaction are single statements in autocommit.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pcor_sql.errors import InternalError, LedgerUnreachable, UserError
from pcor_sql.ledger.admission_memory import refuse_reads
from pcor_sql.ledger.layout import Layout, expected_layout, migrate_fix
from pcor_sql.ledger.migration import MigrationReport
from pcor_sql.ledger import history_chain_steps, postgres_chain
from pcor_sql.ledger.postgres_ops import PostgresChargeOps, _all
from pcor_sql.ledger.postgres_registry import PostgresRegistryOps
from pcor_sql.ledger.postgres_sharing import PostgresSharingOps
from pcor_sql.ledger.store_interface import LedgerOps, LedgerStore
from pcor_sql.resources import sql_text

_T = TypeVar("_T")

#: The URL schemes that name a PostgreSQL ledger.
SCHEMES = ("postgresql://", "postgres://")
#: An advisory lock key held while the tables are made (two services starting at once).
_CREATE_LOCK = 7_261_100_039


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(SCHEMES)


def redacted(url: str) -> str:
    """The URL without its password (what messages and a data file's marker show)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UserError("a PostgreSQL ledger needs psycopg 3, which is not installed",
                        "install it: pip install 'pcor-sql[postgres]'") from None
    return psycopg


class PostgresOps(PostgresChargeOps, PostgresRegistryOps, PostgresSharingOps, LedgerOps):
    """`LedgerOps` on one psycopg cursor."""

    def __init__(self, cur: Any):
        self.cur = cur

    # ---- the history's hash chain and the reservations' leases (DESIGN.md §11) ---------------

    def chain_rows(self, ids):
        return postgres_chain.chain_rows(self.cur, ids)

    def chain_all(self):
        return postgres_chain.chain_all(self.cur)

    def chain_heads(self):
        return postgres_chain.chain_heads(self.cur)

    def chain_append(self, entries, heads, stored, now):
        postgres_chain.chain_append(self.cur, entries, heads, stored, now)

    def chain_put_back(self, rows, present, drop):
        postgres_chain.chain_put_back(self.cur, rows, present, drop)

    def renew_lease(self, holder, seconds):
        postgres_chain.renew_lease(self.cur, holder, seconds)

    def end_lease(self, holder):
        postgres_chain.end_lease(self.cur, holder)

    def lapsed_leases(self):
        return postgres_chain.lapsed_leases(self.cur)

    def interrupt_unleased(self, now):
        return postgres_chain.interrupt_unleased(self.cur, now)


class PostgresStore(LedgerStore):
    """The ledger in schema `pcor` of the PostgreSQL database `url` (see the module docstring).
    `busy_timeout` bounds, in seconds, how long a transaction retries on serialization failures."""

    kind = "postgresql"

    def __init__(self, url: str, *, busy_timeout: float = 10.0, read_only: bool = False):
        self._psycopg = _psycopg()
        self.url = url
        self.path = redacted(url)
        self.read_only = read_only
        self._busy_timeout = busy_timeout
        self._idle: list[Any] = []
        self._pool_lock = threading.Lock()
        self._jitter = random.Random()  # retry sleeps only, never a release
        self._closed = False
        errors = self._psycopg.errors
        self._retryable = (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation)
        self.exists = False
        self._problem: Exception | None = None
        self.reopen()

    # ---- connections --------------------------------------------------------------------------

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True, **_network_options(self.url))
        except self._psycopg.Error as exc:
            raise LedgerUnreachable(f"cannot reach the budget ledger at {self.path}: {_first_line(exc)}",
                                    "check the URL, that the server runs and that it lets this user in") from None

    def _take(self) -> Any:
        refuse_reads()  # every statement of the ledger starts here (`admission_memory.kept_only`)
        with self._pool_lock:
            if self._closed:
                raise InternalError("the PostgreSQL ledger was closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return self._connect()

    def _give(self, conn: Any) -> None:
        with self._pool_lock:
            if self._closed or conn.closed or conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                conn.close()
            else:
                self._idle.append(conn)

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- transactions -------------------------------------------------------------------------

    def transaction(self, body: Callable[[LedgerOps], _T], *, single: bool = False, beside: bool = False) -> _T:
        """(See LedgerStore.) SERIALIZABLE; run again after a serialization failure (40001), a
        deadlock (40P01) or a key a concurrent transaction inserted first (23505), with bounded
        exponential backoff and jitter, for `busy_timeout` seconds of conflicts.

        The busy clock counts the backoff sleeps and the attempts that conflicted, but not the
        part of an attempt spent waiting on a row lock: a host that vanished mid-transaction holds
        its budget row until the server ends it (`IDLE_IN_TRANSACTION_S`), and a charge queued
        behind it has not met a conflict in that time — counting it would turn a survivable fault
        into "busy" for every charge that waited (DESIGN.md §11 "Faults": the other host goes
        on). An attempt that fails after longer than `LOCK_WAIT_S` was such a wait; the whole
        transaction still ends within `busy_timeout + IDLE_IN_TRANSACTION_S` seconds."""
        deadline = time.monotonic() + self._busy_timeout
        last_call = deadline + IDLE_IN_TRANSACTION_S
        delay = 0.001
        while True:
            conn = self._take()
            attempt = time.monotonic()
            try:
                with conn.cursor() as cur:
                    cur.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                    try:
                        result = body(PostgresOps(cur))
                        cur.execute("COMMIT")
                    except BaseException:
                        _rollback(conn)
                        raise
                return result
            except self._retryable:
                now = time.monotonic()
                if now - attempt > LOCK_WAIT_S:  # queued behind a lock, not contended: not busy time
                    deadline = min(deadline + (now - attempt), last_call)
                if now >= deadline:
                    raise UserError(
                        f"the budget ledger at {self.path} stayed busy for {self._busy_timeout:g} s"
                        " (other charges kept conflicting)", "retry the release") from None
            except self._psycopg.Error as exc:
                raise self._failure(exc) from None
            finally:
                self._give(conn)
            time.sleep(min(delay * (0.5 + self._jitter.random()), max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.05)

    def read(self, body: Callable[[LedgerOps], _T]) -> _T:
        conn = self._take()
        try:
            with conn.cursor() as cur:
                return body(PostgresOps(cur))
        except self._psycopg.Error as exc:
            raise self._failure(exc) from None
        finally:
            self._give(conn)

    def _failure(self, exc: Exception) -> Exception:
        """The one-line UserError for a failure a user can cause; anything else stays as it is."""
        errors = self._psycopg.errors
        first = _first_line(exc)
        if isinstance(exc, (errors.DiskFull, errors.ReadOnlySqlTransaction, errors.InsufficientPrivilege)):
            return UserError(f"the budget ledger at {self.path} could not be written ({first})",
                             "free space on the server (or let this user write) and retry;"
                             " `pcor-sql budget verify` checks the ledger")
        if isinstance(exc, (errors.UndefinedTable, errors.UndefinedColumn)):
            return UserError(f"the budget ledger at {self.path} is damaged ({first})", "restore it from a backup")
        if isinstance(exc, self._psycopg.OperationalError):
            return LedgerUnreachable(f"the budget ledger at {self.path} cannot be reached ({first})",
                             "check that the server runs and this host reaches it, then retry")
        return exc

    # ---- layout -------------------------------------------------------------------------------

    def label(self) -> str:
        return repr(self.path)

    def layout_problem(self) -> Exception | None:
        return self._problem

    def reopen(self) -> None:
        layout = self._layout()
        if layout.absent and not self.read_only:
            self._create()
            layout = self._layout()
        self.exists = layout.current
        problem = layout.problem(self.label())
        if problem is not None and _only_tables_missing(layout):  # a ledger of a version before them
            missing = "; ".join(f"pcor.{t} is missing" for t in sorted(layout.missing()))
            problem = UserError(f"the budget ledger at {self.path} is in an older layout ({missing})", migrate_fix())
        elif problem is not None and not layout.newer:
            problem = UserError(f"the budget ledger at {self.path} lacks tables or columns of this version"
                                f" ({getattr(problem, 'problem', problem)})",
                                "restore it from a backup, or give a database without a ledger (one is made)")
        self._problem = problem

    def _layout(self) -> Layout:
        rows = self.read(lambda ops: _all(ops.cur, "SELECT table_name, column_name FROM information_schema.columns"  # type: ignore[attr-defined]
                                                    " WHERE table_schema = 'pcor' ORDER BY table_name, ordinal_position"))
        columns: dict[str, list[str]] = {}
        for table, column in rows:
            columns.setdefault(table, []).append(column)
        return Layout({t: tuple(c) for t, c in columns.items() if t in expected_layout() or t == "meta"}, ())

    def _create(self) -> None:
        script = sql_text("ledger_postgres.sql")

        def body(ops: LedgerOps) -> None:
            ops.cur.execute(f"SELECT pg_advisory_xact_lock({_CREATE_LOCK})")
            ops.cur.execute(script)

        self.transaction(body)

    def ledger_id(self) -> str:
        """This ledger's id (made with its tables), which a data file's marker names."""
        rows = self.read(lambda ops: _all(ops.cur, "SELECT value FROM pcor.meta WHERE name = 'ledger_id'"))  # type: ignore[attr-defined]
        if not rows:
            raise UserError(f"the budget ledger at {self.path} has no id", "restore it from a backup")
        return rows[0][0]

    def migrate(self, resolve: Callable[[str], Sequence[str]] | None) -> MigrationReport:
        """A ledger of a version before some tables (the history's chain, the leases) gets them,
        and its history its hash chain (DESIGN.md §11), in one transaction; any other difference
        from the current layout is refused."""
        layout = self._layout()
        if layout.current:
            return MigrationReport(changed=False)
        if self.read_only or not _only_tables_missing(layout):
            raise self._problem or layout.problem(self.label())  # type: ignore[misc]
        created = tuple(t for t in expected_layout() if t in layout.missing())
        script = sql_text("ledger_postgres.sql")

        def body(ops: LedgerOps) -> int:
            ops.cur.execute(f"SELECT pg_advisory_xact_lock({_CREATE_LOCK})")
            ops.cur.execute(script)
            return history_chain_steps.build_missing(ops)

        chained = self.transaction(body)
        self.reopen()
        return MigrationReport(created=created, chained=chained)


def _only_tables_missing(layout: Layout) -> bool:
    """Whether the layout differs from the current one only by whole tables it lacks."""
    missing = layout.missing()
    return bool(missing) and not layout.unknown() and all(t not in layout.columns for t in missing)


#: How a connection notices that the server is gone (DESIGN.md §11 "Faults": a host cut off from
#: PostgreSQL fails its requests, it does not hang on them): a connect gives up after 10 s; data
#: sent but not acknowledged for 10 s drops the connection (tcp_user_timeout, ms); an idle one is
#: probed after 5 s, every 2 s, 3 times. And how the server lets go of a host that vanished
#: mid-transaction: a session idle inside a transaction for 20 s is ended by the server
#: (idle_in_transaction_session_timeout), rolling back and releasing its locks on budget and quota
#: rows — else the other hosts' charges of those rows would wait on them for as long as the
#: server takes to notice the dead connection (hours, by the kernel's keepalive defaults). No
#: transaction of the ledger waits between its statements for anything but this process's own
#: work. A URL that sets one of these keeps its own.
IDLE_IN_TRANSACTION_S = 20
NETWORK_OPTIONS: dict[str, object] = {
    "connect_timeout": 10, "tcp_user_timeout": 10_000, "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2,
    "keepalives_count": 3, "options": f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_S * 1000}"}
#: A failed attempt that took longer than this waited on a lock (a conflict fails in milliseconds).
LOCK_WAIT_S = 1.0


def _network_options(url: str) -> dict[str, object]:
    given = {key.lower() for key, _ in urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)}
    return {key: value for key, value in NETWORK_OPTIONS.items() if key not in given}


def _rollback(conn: Any) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:  # the connection may be gone: it is dropped from the pool then
        pass


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
