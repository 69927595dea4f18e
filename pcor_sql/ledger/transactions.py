"""Running one transaction of the DuckDB store: retry on DuckDB's write conflicts, and the
database failures a user can cause turned into one line with a fix (a full disk, a damaged
ledger). `utc_now` is the ledger's clock for both stores."""

from __future__ import annotations

import datetime as _dt
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import duckdb

from pcor_sql.errors import UserError

_T = TypeVar("_T")


def is_conflict(exc: BaseException) -> bool:
    """A DuckDB error that a retry from a fresh snapshot resolves: a write-write conflict on a row
    or the catalog, or a duplicate key inserted by a transaction that committed first."""
    if not isinstance(exc, (duckdb.TransactionException, duckdb.ConstraintException)):
        return False
    message = str(exc).lower()
    return "conflict" in message or "duplicate key" in message


def rollback_quietly(cur: Any) -> None:
    # After a failed statement or COMMIT DuckDB may already have ended the transaction.
    try:
        cur.execute("ROLLBACK")
    except duckdb.Error:
        pass


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


_DISK = ("no space left", "could not write", "failed to commit", "disk full", "read-only file system")


def ledger_failure(exc: BaseException, label: str) -> UserError | None:
    """The one-line UserError for a database failure a user can cause, or None for the others
    (conflicts are retried; anything else is a bug and stays as it is). A full disk makes
    DuckDB's COMMIT fail (TransactionException "Failed to commit: Could not write ... No space
    left on device"): the transaction is rolled back, so what it would have written is not
    there. A table or column missing from the ledger (a hand edit) is a BinderException or a
    CatalogException."""
    if is_conflict(exc) or not isinstance(exc, duckdb.Error):
        return None
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    if isinstance(exc, (duckdb.IOException, duckdb.TransactionException)) and any(m in first.lower() for m in _DISK):
        return UserError(f"the budget ledger of {label} could not be written ({first})",
                         "free space on that disk (or make it writable) and retry; `pcor-sql budget verify` checks the ledger")
    if isinstance(exc, (duckdb.BinderException, duckdb.CatalogException)):
        return UserError(f"the budget ledger of {label} is damaged ({first})",
                         "`pcor-sql budget migrate` rebuilds its tables (spent and limits kept), or restore it from a backup")
    return None


@dataclass(frozen=True)
class LedgerAccess:
    """What a charge in progress needs of its ledger, and nothing more (no back reference to
    the Ledger, so `reservation` does not import `store`): a retried transaction and a read,
    each running a body over the store's `LedgerOps`."""

    transaction: Callable[..., Any]  # (body, *, single=False, beside=False) -> what body returns
    read: Callable[..., Any]  # (body) -> what body returns


def run_transaction(cursor: Callable[[], Any], body: Callable[[Any], _T], busy_timeout: float,
                    jitter: random.Random, label: str, *, single: bool = False) -> _T:
    """Run `body` in one transaction on a fresh cursor; on a DuckDB conflict roll back and run
    it again from a fresh snapshot (bounded exponential backoff with jitter), for at most
    `busy_timeout` seconds. Failures a user can cause become one-line UserErrors. `single`:
    `body` runs one statement, which DuckDB commits on its own (no BEGIN and COMMIT)."""
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        cur = cursor()
        try:
            if not single:
                cur.execute("BEGIN TRANSACTION")
            result = body(cur)
            if not single:
                cur.execute("COMMIT")
            return result
        except BaseException as exc:
            rollback_quietly(cur)
            if not is_conflict(exc):
                failure = ledger_failure(exc, label)
                if failure is not None:
                    raise failure from None
                raise
            if time.monotonic() >= deadline:
                raise UserError(
                    f"the budget ledger of database {label} stayed busy for {busy_timeout:g} s"
                    " (other charges kept conflicting)",
                    "retry the release",
                ) from None
        finally:
            cur.close()
        time.sleep(min(delay * (0.5 + jitter.random()), max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)
