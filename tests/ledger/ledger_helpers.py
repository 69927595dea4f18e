"""Helpers shared by the ledger tests: a charge as a release makes it (the pipeline's path:
`reserve`, then `answered`), the raw tables, and the environment of worker processes."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pcor_sql
from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.store import ChargeItem, Ledger, new_release_id


def charge_items(ledger: Ledger, units: str | Sequence[str], items: Sequence[ChargeItem]) -> float:
    """Charge `items` to `units` as the pipeline does (reserve, then record the answer); the
    binding unit's total afterwards."""
    reservation = ledger.reserve(units, items)
    reservation.answered()
    return reservation.spent


def charge(ledger: Ledger, dataset: str, epsilon: float, release_id: str | None = None) -> float:
    return charge_items(ledger, dataset, [ChargeItem(
        release_id or new_release_id(), OcdpCost(epsilon), "bfs", record_key="id = 42",
        statement="SELECT salary FROM salaries WHERE id = 42")])


def check_fit(ledger: Ledger, units: str | Sequence[str], epsilon: float) -> None:
    """Refuse early as the analyst service does (`Ledger.check_fit`), for one release of ε."""
    ledger.check_fit(units, [ChargeItem("check", OcdpCost(epsilon), "bfs")])


def conflicts_seen(monkeypatch) -> threading.Event:
    """An event set once a ledger transaction meets a conflict and is about to run again
    (`transactions.run_transaction`): a test waits on it to know a writer really is waiting."""
    from pcor_sql.ledger import transactions

    seen, real = threading.Event(), transactions.is_conflict

    def watched(exc: BaseException) -> bool:
        conflict = real(exc)
        if conflict:
            seen.set()
        return conflict

    monkeypatch.setattr(transactions, "is_conflict", watched)
    return seen


def raw(ledger: Ledger, query: str, params: Sequence[object] = ()) -> list[tuple]:
    """A statement over the ledger's tables (`pcor.<table>`, placeholders $1, ...) in its store's
    SQL — a hand edit, or a look at the raw rows (`LedgerOps.raw`)."""
    return ledger.read_with(lambda ops: ops.raw(query, params))


def disk_full(ledger: Ledger) -> Exception:
    """The exception the ledger's store raises when its disk is full."""
    if ledger.kind == "postgresql":
        import psycopg

        return psycopg.errors.DiskFull("could not extend file: No space left on device (injected)")
    import duckdb

    return duckdb.IOException("Could not write: No space left on device (injected)")


def ledger_rows(ledger: Ledger) -> tuple[list, list]:
    """The raw ledger tables, to show that a refused or failed charge changed nothing."""
    budget = raw(ledger, "SELECT * FROM pcor.budget ORDER BY unit, notion")
    history = raw(ledger, "SELECT * FROM pcor.history ORDER BY unit, notion, seq")
    return budget, history


def subprocess_env() -> dict[str, str]:
    # The workers import the same pcor_sql as this test (checkout or installed copy).
    package_root = str(Path(pcor_sql.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env
