"""Helpers shared by the ledger tests: a charge as a release makes it, the raw tables, and the
environment of worker processes."""

from __future__ import annotations

import os
from pathlib import Path

import pcor_sql
from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.store import Ledger, new_release_id


def charge(ledger: Ledger, dataset: str, epsilon: float, release_id: str | None = None) -> float:
    return ledger.charge(
        dataset,
        OcdpCost(epsilon),
        mechanism="bfs",
        record_key="id = 42",
        statement="SELECT salary FROM salaries WHERE id = 42",
        release_id=release_id or new_release_id(),
    )


def ledger_rows(con) -> tuple[list, list]:
    """The raw ledger tables, to show that a refused or failed charge changed nothing."""
    budget = con.execute("SELECT * FROM pcor.budget ORDER BY unit, notion").fetchall()
    history = con.execute("SELECT * FROM pcor.history ORDER BY unit, notion, seq").fetchall()
    return budget, history


def subprocess_env() -> dict[str, str]:
    # The workers import the same pcor_sql as this test (checkout or installed copy).
    package_root = str(Path(pcor_sql.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env
