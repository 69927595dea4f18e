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

import datetime as _dt
import decimal
import hashlib
import math
import numbers
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, overload

import duckdb

from pcor_sql.engine.quoting import quote_identifier
from pcor_sql.errors import BudgetExceeded, InternalError, UserError
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.tokens import QUOTED_IDENT, STRING, Token, Unterminated, significant, tokenize

#: Float slack when comparing spent + ε with a limit: releases of ε = 0.1 and 0.2 must fit a
#: limit of 0.3 although 0.1 + 0.2 is 0.30000000000000004 in floats.
TOLERANCE = 1e-12

IN_MEMORY_WARNING = (
    "the budget ledger is in memory and is lost when the process ends — use --db FILE to keep it"
)

_T = TypeVar("_T")


@dataclass(frozen=True)
class BudgetStatus:
    """The budget of one dataset. `limit` and `remaining` are None while no limit is set."""

    dataset: str
    limit: float | None
    spent: float
    remaining: float | None
    releases: int


@dataclass(frozen=True)
class ReleaseRecord:
    """One charged release. `seq` numbers a dataset's releases from 1 in charge order;
    `released_at` is UTC; `spent_after` is the dataset's spent ε once this release was charged."""

    release_id: str
    dataset: str
    seq: int
    released_at: _dt.datetime
    mechanism: str
    epsilon: float
    record_key: str | None
    statement: str | None
    spent_after: float


@dataclass(frozen=True)
class ChargeItem:
    """One release to charge (see `Ledger.charge_many`)."""

    release_id: str
    epsilon: float
    mechanism: str
    record_key: str | None = None
    statement: str | None = None


@dataclass(frozen=True)
class LimitChange:
    """The result of `Ledger.set_limit`. `below_spent` is True when the new limit is below the ε
    already spent: allowed (the owner may tighten a budget), but no release fits until it is raised."""

    dataset: str
    limit: float
    previous_limit: float | None
    spent: float
    below_spent: bool


def new_release_id() -> str:
    """A fresh release id (random, 128 bits). Make it before computing a release and pass the same
    id to every charge of that release, so a retried charge is not charged twice."""
    return os.urandom(16).hex()


class Ledger:
    """The budget ledger of the database `con` is using (its current database and schema).

    Every operation runs on a private cursor of `con`, so the caller's open transaction or
    half-read result is never touched, and a charge is committed on its own. Safe to share
    between threads. `warn(message)` receives the in-memory warning, once per Ledger (so make
    one per session, not one per release).
    `busy_timeout` bounds, in seconds, how long a charge retries on transaction conflicts.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        warn: Callable[[str], None] | None = None,
        busy_timeout: float = 10.0,
    ):
        if not (isinstance(busy_timeout, numbers.Real) and math.isfinite(busy_timeout) and busy_timeout >= 0):
            raise InternalError(f"busy_timeout must be a finite number ≥ 0, got {busy_timeout!r}")
        self._con = con
        self._busy_timeout = float(busy_timeout)
        self._cursor_lock = threading.Lock()
        # Jitter for retry sleeps only (spreads colliding writers apart); it never touches a
        # release, so it need not come from the release's randomness source.
        self._jitter = random.Random()
        database, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
        rows = con.execute(
            "SELECT path, readonly FROM duckdb_databases() WHERE database_name = $1", [database]
        ).fetchall()
        if not rows:
            raise InternalError(f"the current database {database!r} is not in duckdb_databases()")
        path, read_only = rows[0]
        self.database: str = database
        self.schema: str = schema
        self.path: str | None = path or None
        self.in_memory: bool = self.path is None
        self.read_only: bool = bool(read_only)
        self._use = f"USE {quote_identifier(database)}.{quote_identifier(schema)}"
        if self.in_memory and warn is not None:
            warn(IN_MEMORY_WARNING)
        if not self.read_only:
            # Two cursors creating the tables at once is a catalog conflict: retried like a charge.
            self._transaction(lambda cur: cur.execute(sql_text("ledger.sql")))

    # ---- reading -------------------------------------------------------------------------

    @overload
    def status(self, dataset: str) -> BudgetStatus: ...

    @overload
    def status(self, dataset: None = None) -> tuple[BudgetStatus, ...]: ...

    def status(self, dataset: str | None = None) -> BudgetStatus | tuple[BudgetStatus, ...]:
        """The budget of `dataset` (a dataset never charged and without a limit: spent 0, no limit),
        or of every dataset in the ledger, sorted by name."""
        query = "SELECT dataset, limit_epsilon, spent_epsilon, releases FROM pcor_budget"
        if dataset is None:
            return tuple(_budget_status(*row) for row in self._read(query + " ORDER BY dataset", []))
        _check_dataset(dataset)
        rows = self._read(query + " WHERE dataset = $1", [dataset])
        return _budget_status(*rows[0]) if rows else BudgetStatus(dataset, None, 0.0, None, 0)

    def history(self, dataset: str | None = None, limit: int | None = None) -> tuple[ReleaseRecord, ...]:
        """The charged releases of `dataset` (or of every dataset), oldest first; with `limit`,
        only the most recent `limit` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"history limit must be a positive integer, got {limit!r}", "pass a count ≥ 1")
        query = (
            "SELECT release_id, dataset, seq, released_at, mechanism, epsilon, record_key, statement,"
            " spent_after FROM pcor_release_history"
        )
        params: list[object] = []
        if dataset is None:
            query += " ORDER BY released_at DESC, dataset DESC, seq DESC"
        else:
            _check_dataset(dataset)
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
        _check_dataset(dataset)
        limit = _check_positive(epsilon_limit, "budget limit")

        def body(cur: duckdb.DuckDBPyConnection) -> LimitChange:
            now = _utc_now()
            rows = cur.execute(
                "SELECT limit_epsilon, spent_epsilon FROM pcor_budget WHERE dataset = $1", [dataset]
            ).fetchall()
            if rows:
                previous, spent = rows[0]
                cur.execute(
                    "UPDATE pcor_budget SET limit_epsilon = $2, updated_at = $3 WHERE dataset = $1",
                    [dataset, limit, now],
                )
            else:
                previous, spent = None, 0.0
                cur.execute(
                    "INSERT INTO pcor_budget (dataset, limit_epsilon, spent_epsilon, releases, created_at,"
                    " updated_at) VALUES ($1, $2, 0, 0, $3, $3)",
                    [dataset, limit, now],
                )
            return LimitChange(dataset, limit, previous, spent, spent > limit + TOLERANCE)

        return self._transaction(body)

    def precheck(self, dataset: str, epsilon: float) -> BudgetStatus:
        """Refuse early: raise UserError if the ledger cannot be charged, BudgetExceeded if a
        release costing `epsilon` would not fit the dataset's limit now. Passing is no
        reservation — `charge` checks again atomically."""
        self.ensure_writable()
        _check_dataset(dataset)
        eps = _check_positive(epsilon, "ε")
        current = self.status(dataset)
        if current.limit is not None and current.spent + eps > current.limit + TOLERANCE:
            raise _refusal(dataset, current.limit, current.spent, eps, 1)
        return current

    def charge(
        self,
        dataset: str,
        epsilon: float,
        *,
        mechanism: str,
        record_key: str | None = None,
        statement: str | None = None,
        release_id: str,
    ) -> float:
        """Charge one release to `dataset` and return the dataset's total spent ε afterwards.
        Atomic; refused with BudgetExceeded (nothing written) if it would exceed the limit; a
        release_id already charged is not charged again (the current total is returned)."""
        item = ChargeItem(release_id, epsilon, mechanism, record_key, statement)
        return self.charge_many(dataset, [item])

    def charge_many(self, dataset: str, items: Iterable[ChargeItem]) -> float:
        """Charge several releases to `dataset` in one transaction, all or nothing, and return the
        dataset's total spent ε afterwards. Their ε add up (sequential composition), and the
        whole batch is refused if the sum would exceed the limit. Items whose release_id is
        already in the history are skipped (already paid for)."""
        self.ensure_writable()
        _check_dataset(dataset)
        batch = tuple(items)
        for item in batch:
            _check_item(item)
        ids = [item.release_id for item in batch]
        if len(set(ids)) != len(ids):
            raise InternalError("one batch of charges repeats a release_id")
        if not batch:
            return self.status(dataset).spent
        return self._transaction(lambda cur: _charge_in(cur, dataset, batch))

    # ---- plumbing ------------------------------------------------------------------------

    def _label(self) -> str:
        return repr(self.path) if self.path else repr(self.database)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # A DuckDB connection is not safe to use from several threads at once; making cursors
        # from it is serialised here, and each cursor is used by one call only.
        with self._cursor_lock:
            cur = self._con.cursor()
        try:
            cur.execute(self._use)
        except BaseException:
            cur.close()
            raise
        return cur

    def _read(self, query: str, params: Sequence[object]) -> list[tuple]:
        cur = self._cursor()
        try:
            if self.read_only and not _tables_exist(cur, self.database, self.schema):
                return []  # a read-only database that was never charged has an empty ledger
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
                _rollback_quietly(cur)
                if not _is_conflict(exc):
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


def _charge_in(cur: duckdb.DuckDBPyConnection, dataset: str, batch: tuple[ChargeItem, ...]) -> float:
    """The body of one charge transaction: idempotency, the limit check, history, the total."""
    seen = {
        rid: (owner, eps)
        for rid, owner, eps in cur.execute(
            "SELECT release_id, dataset, epsilon FROM pcor_release_history"
            " WHERE release_id IN (SELECT unnest($1::VARCHAR[]))",
            [[item.release_id for item in batch]],
        ).fetchall()
    }
    fresh = []
    for item in batch:
        if item.release_id not in seen:
            fresh.append(item)
        elif seen[item.release_id] != (dataset, item.epsilon):
            owner, eps = seen[item.release_id]
            raise InternalError(
                f"release_id {item.release_id!r} was charged before as ε = {eps!r} to dataset {owner!r}, "
                f"now as ε = {item.epsilon!r} to {dataset!r}"
            )
    rows = cur.execute(
        "SELECT limit_epsilon, spent_epsilon, spent_residual, releases FROM pcor_budget WHERE dataset = $1",
        [dataset],
    ).fetchall()
    limit, spent, residual, releases = rows[0] if rows else (None, 0.0, 0.0, 0)
    if not fresh:
        return spent
    running = []
    total = spent
    for item in fresh:
        total, residual = _add_compensated(total, residual, item.epsilon)
        running.append(total)
    if limit is not None and total > limit + TOLERANCE:
        raise _refusal(dataset, limit, spent, math.fsum(item.epsilon for item in fresh), len(fresh))
    now = _utc_now()
    cur.execute(
        "INSERT INTO pcor_release_history (release_id, dataset, seq, released_at, mechanism, epsilon,"
        " record_key, statement, spent_after)"
        " SELECT unnest($1::VARCHAR[]), $2, unnest($3::BIGINT[]), $4, unnest($5::VARCHAR[]),"
        " unnest($6::DOUBLE[]), unnest($7::VARCHAR[]), unnest($8::VARCHAR[]), unnest($9::DOUBLE[])",
        [
            [item.release_id for item in fresh],
            dataset,
            list(range(releases + 1, releases + 1 + len(fresh))),
            now,
            [item.mechanism for item in fresh],
            [float(item.epsilon) for item in fresh],
            [item.record_key for item in fresh],
            [item.statement for item in fresh],
            running,
        ],
    )
    if rows:
        cur.execute(
            "UPDATE pcor_budget SET spent_epsilon = $2, spent_residual = $3, releases = $4, updated_at = $5"
            " WHERE dataset = $1",
            [dataset, total, residual, releases + len(fresh), now],
        )
    else:
        cur.execute(
            "INSERT INTO pcor_budget (dataset, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
            " updated_at) VALUES ($1, NULL, $2, $3, $4, $5, $5)",
            [dataset, total, residual, len(fresh), now],
        )
    return total


def _add_compensated(total: float, residual: float, epsilon: float) -> tuple[float, float]:
    """(total, residual) + epsilon in double-double arithmetic: Knuth's TwoSum gives the exact
    rounding error of total + epsilon, which joins the residual; the pair is then renormalised
    so `total` is the sum rounded once and `residual` what rounding left out."""
    rounded = total + epsilon
    virtual = rounded - total
    error = (total - (rounded - virtual)) + (epsilon - virtual)
    residual += error
    renormalised = rounded + residual
    return renormalised, residual - (renormalised - rounded)


def connect_with_retry(
    path: str | os.PathLike[str], *, read_only: bool = False, timeout: float = 10.0
) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB database file, waiting up to `timeout` seconds while another process holds
    its lock (DuckDB lets one process at a time open a file read-write; a reader is also locked
    out by a writer). Then a UserError names the file and the process holding it."""
    if not (isinstance(timeout, numbers.Real) and math.isfinite(timeout) and timeout >= 0):
        raise UserError(f"timeout must be a finite number of seconds ≥ 0, got {timeout!r}", "pass e.g. 10")
    target = os.fspath(path)
    jitter = random.Random()  # timing only, see Ledger
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            return duckdb.connect(target, read_only=read_only)
        except duckdb.IOException as exc:
            message = str(exc)
            if "lock" not in message.lower():
                if read_only and "does not exist" in message:
                    raise UserError(
                        f"database {target!r} does not exist", "check the path (a read-only open cannot create it)"
                    ) from None
                raise
            if time.monotonic() >= deadline:
                pid = re.search(r"PID (\d+)", message)
                holder = f" (pid {pid.group(1)})" if pid else ""
                raise UserError(
                    f"database {target!r} is locked by another process{holder}",
                    f"wait for that process to finish or stop it, then retry (waited {timeout:g} s)",
                ) from None
        time.sleep(min(delay * (0.5 + jitter.random()), max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.1)


def dataset_key(relation_sql: str) -> str:
    """A stable ledger name for a relation given as SQL text (a table name, a file, a subquery):
    a readable slug and a hash of the text normalised so that case and spacing outside quotes,
    comments and a trailing semicolon do not matter, e.g. `salaries#3c1f0e9a5b7d2c44`."""
    if not isinstance(relation_sql, str):
        raise UserError(f"the relation must be SQL text, got {type(relation_sql).__name__}", "pass a string")
    normalized = _normalize_sql(relation_sql)
    if not normalized:
        raise UserError("the relation is empty", "name a table, a view, a file or a subquery")
    digest = hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]
    slug = re.sub(r"[^0-9a-z]+", "_", normalized.lower()).strip("_")[:40].strip("_") or "relation"
    return f"{slug}#{digest}"


def _normalize_sql(text: str) -> str:
    """Case-fold and squeeze the text outside quotes (DuckDB's unquoted identifiers and keywords
    ignore case; spacing next to punctuation and quotes means nothing), drop comments and a
    trailing semicolon, keep quoted identifiers and string literals verbatim."""
    try:
        code = significant(tokenize(text))
    except Unterminated as exc:
        # dataset_key also names ledgers typed by hand (`budget set-limit NAME`), which need not
        # be SQL: an open quote keeps the rest as one literal, an open comment is dropped.
        code = significant(tokenize(text[:exc.start]))
        if exc.what != "comment":
            kind = QUOTED_IDENT if exc.what == "quoted identifier" else STRING
            code.append(Token(kind, text[exc.start:], exc.start, len(text), 0))
    while code and code[-1].is_punct(";"):
        code.pop()
    pieces: list[str] = []
    for previous, token in zip([None, *code], code):
        # Blanks or a comment between two words still separate them; elsewhere they mean nothing.
        if previous is not None and previous.end < token.start and _WORD_EDGE.match(previous.text[-1] + token.text[0]):
            pieces.append(" ")
        pieces.append(_case_folded(token))
    return "".join(pieces)


_WORD_EDGE = re.compile(r"\w\w")


def _case_folded(token: Token) -> str:
    if token.kind == QUOTED_IDENT or (token.kind == STRING and token.text.startswith("$")):
        return token.text
    if token.kind == STRING:  # only a prefix such as E'...' or X'...' ignores case
        prefix, quote, rest = token.text.partition("'")
        return prefix.lower() + quote + rest
    return token.text.lower()


def _budget_status(dataset: str, limit: float | None, spent: float, releases: int) -> BudgetStatus:
    remaining = None if limit is None else max(0.0, limit - spent)
    return BudgetStatus(dataset, limit, spent, remaining, releases)


def _refusal(dataset: str, limit: float, spent: float, epsilon: float, count: int) -> BudgetExceeded:
    what = "a release costing" if count == 1 else f"{count} releases costing in total"
    headroom = _headroom(limit, spent)
    if headroom is None:
        return BudgetExceeded(
            f"the privacy budget of dataset {dataset!r} is used up (spent ε = {spent:.6g} of limit "
            f"{limit:.6g}): {what} ε = {epsilon:.6g} is refused",
            "raise the dataset's budget limit to release more",
        )
    return BudgetExceeded(
        f"{what} ε = {epsilon:.6g} would exceed the privacy budget of dataset {dataset!r} "
        f"(limit {limit:.6g}, spent {spent:.6g}, remaining {headroom})",
        f"use ε ≤ {headroom} or raise the dataset's budget limit",
    )


def _headroom(limit: float, spent: float) -> str | None:
    """The remaining budget in 6 significant digits, rounded to nearest if that still fits the
    limit (1.0 − 0.8 shows as 0.2), else rounded down — so following the advice never hits the
    limit again. None when nothing is left."""
    remaining = limit - spent
    if remaining <= TOLERANCE:
        return None
    for rounding in (decimal.ROUND_HALF_EVEN, decimal.ROUND_DOWN):
        shown = decimal.Context(prec=6, rounding=rounding).create_decimal(remaining)
        if shown > 0 and spent + float(shown) <= limit + TOLERANCE:
            return f"{float(shown):.6g}"
    return None


def _check_dataset(dataset: object) -> None:
    if not isinstance(dataset, str) or not dataset.strip():
        raise UserError(f"invalid dataset name {dataset!r}", "name the dataset with a non-empty string")
    if "\x00" in dataset:
        raise UserError("a dataset name contains a NUL character", "remove it")


def _check_positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise UserError(f"the {what} must be a finite number > 0, got {value!r}", f"pass a positive {what}")
    return float(value)


def _check_item(item: object) -> None:
    if not isinstance(item, ChargeItem):
        raise InternalError(f"charge_many expects ChargeItem values, got {type(item).__name__}")
    _check_positive(item.epsilon, "ε")
    if not isinstance(item.release_id, str) or not item.release_id:
        raise InternalError(f"a charge needs a non-empty release_id, got {item.release_id!r}")
    if not isinstance(item.mechanism, str) or not item.mechanism:
        raise InternalError(f"a charge needs a mechanism name, got {item.mechanism!r}")
    for name in ("record_key", "statement"):
        if not isinstance(getattr(item, name), (str, type(None))):
            raise InternalError(f"{name} of a charge must be text or None")


def _tables_exist(cur: duckdb.DuckDBPyConnection, database: str, schema: str) -> bool:
    rows = cur.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = $1 AND schema_name = $2"
        " AND table_name IN ('pcor_budget', 'pcor_release_history')",
        [database, schema],
    ).fetchall()
    return rows[0][0] == 2


def _is_conflict(exc: BaseException) -> bool:
    """A DuckDB error that a retry from a fresh snapshot resolves: a write-write conflict on a row
    or the catalog, or a duplicate key inserted by a transaction that committed first."""
    if not isinstance(exc, (duckdb.TransactionException, duckdb.ConstraintException)):
        return False
    message = str(exc).lower()
    return "conflict" in message or "duplicate key" in message


def _rollback_quietly(cur: duckdb.DuckDBPyConnection) -> None:
    # After a failed statement or COMMIT DuckDB may already have ended the transaction.
    try:
        cur.execute("ROLLBACK")
    except duckdb.Error:
        pass


def _utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
