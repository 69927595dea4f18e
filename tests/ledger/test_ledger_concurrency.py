"""The ledger under concurrency: threads sharing a connection (cursors), a writer holding a
row, and two real processes on one file — never overspent; the file lock and its wait."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from pcor_sql.errors import BudgetExceeded, UserError
from pcor_sql.ledger import transactions as ledger_charge
from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.ledger.store import BudgetStatus, Ledger

from ledger_helpers import charge, conflicts_seen, subprocess_env
from tests.start_line import start_together

WORKER = Path(__file__).with_name("ledger_worker.py")


# ---- concurrency -------------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["a ledger per cursor", "one shared ledger"])
def test_threads_charging_concurrently_never_overspend(ledger, reopen, sharing):
    """On either store: a ledger per thread (its own cursor, or its own PostgreSQL connections:
    concurrent transactions that conflict and are retried), or one shared by all."""
    shared = ledger
    shared.set_limit("d", 1.0)
    threads_count, attempts = 4, 10
    own = [reopen() if sharing == "a ledger per cursor" else shared for _ in range(threads_count)]
    outcomes: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(threads_count)

    def work(index: int) -> None:
        try:
            ledger = own[index]
            start.wait()
            for attempt in range(attempts):
                try:
                    charge(ledger, "d", 0.1, release_id=f"t{index}-{attempt}")
                    outcomes.append("charged")
                except BudgetExceeded:
                    outcomes.append("refused")
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert outcomes.count("charged") == 10 and outcomes.count("refused") == threads_count * attempts - 10
    ledger = reopen()
    assert ledger.status("d") == BudgetStatus("d", "ocdp", 1.0, "own", 1.0, 0.0, 10)
    history = ledger.history("d")
    assert len(history) == 10 and [r.seq for r in history] == list(range(1, 11))
    assert ledger.verify() == []


def test_a_charge_waits_out_a_conflicting_writer_and_sees_its_spend(con, monkeypatch):
    ledger = Ledger(con)
    ledger.set_limit("d", 1.0)
    holder = con.cursor()
    holder.execute("BEGIN TRANSACTION")
    # Another writer has the budget row in an uncommitted transaction (as a concurrent charge of
    # 0.95 would): DuckDB refuses our write until it ends, and then we must see its 0.95.
    holder.execute("UPDATE pcor.budget SET spent_epsilon = 0.95 WHERE unit = 'd'")
    outcome: list[object] = []
    conflicted = conflicts_seen(monkeypatch)

    def work():
        try:
            outcome.append(charge(Ledger(con.cursor()), "d", 0.1))
        except BaseException as exc:  # inspected below
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    assert conflicted.wait(timeout=10) and outcome == []  # it met the other writer and is retrying
    holder.execute("COMMIT")
    thread.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], BudgetExceeded)
    assert ledger.status("d").spent == 0.95 and ledger.history("d") == ()
    holder.close()


def test_a_ledger_that_stays_busy_gives_up_with_a_user_error(con):
    Ledger(con).set_limit("d", 1.0)
    holder = con.cursor()
    holder.execute("BEGIN TRANSACTION")
    holder.execute("UPDATE pcor.budget SET updated_at = now()::TIMESTAMP WHERE unit = 'd'")
    impatient = Ledger(con, busy_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(UserError, match="busy"):
        charge(impatient, "d", 0.1)
    assert 0.2 <= time.monotonic() - started < 5
    holder.execute("ROLLBACK")
    holder.close()
    assert Ledger(con).status("d").spent == 0.0


def test_two_processes_never_overspend(tmp_path):
    path = tmp_path / "shared.db"
    setup = duckdb.connect(str(path))
    Ledger(setup).set_limit("salaries", 1.0)
    setup.close()
    go = tmp_path / "go"
    # A checks early, works, then charges; B charges without the early check, so only the
    # reservation's own atomic check keeps the two processes within the limit.
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), "salaries", tag, "10", "0.1", str(go), "0.02", mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        for tag, mode in (("A", "check"), ("B", "direct"))
    ]
    start_together(go, len(workers))  # both have imported duckdb: they start charging together
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["charged"] for r in reports) == 10
    assert sum(r["refused"] for r in reports) == 10
    reader = duckdb.connect(str(path), read_only=True)
    ledger = Ledger(reader)
    assert ledger.status("salaries") == BudgetStatus("salaries", "ocdp", 1.0, "own", 1.0, 0.0, 10)
    history = ledger.history("salaries")
    assert len(history) == 10 and [r.seq for r in history] == list(range(1, 11))
    assert sorted(r.record_key for r in history) == sorted(
        tag for tag, report in zip("AB", reports) for _ in range(report["charged"])
    )
    reader.close()


def test_connect_with_retry_waits_for_the_lock_then_names_the_holder(tmp_path):
    path = tmp_path / "locked.db"
    duckdb.connect(str(path)).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
            " sys.stdin.readline(); c.close()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        with pytest.raises(UserError) as locked:
            connect_with_retry(path, timeout=0.3)
        assert time.monotonic() - started >= 0.3
        assert f"pid {holder.pid}" in locked.value.problem and str(path) in locked.value.problem
        with pytest.raises(UserError, match="locked"):
            connect_with_retry(path, read_only=True, timeout=0.1)
        # Released while we wait: the open goes through.
        threading.Timer(0.3, lambda: (holder.stdin.write("done\n"), holder.stdin.flush())).start()
        started = time.monotonic()
        con = connect_with_retry(path, timeout=10)
        assert 0.2 < time.monotonic() - started < 10
        con.close()
    finally:
        holder.kill()
        holder.wait()


def test_conflict_detection_is_narrow():
    assert ledger_charge.is_conflict(duckdb.TransactionException("TransactionContext Error: Conflict on update!"))
    assert ledger_charge.is_conflict(duckdb.ConstraintException('Duplicate key "id: 1" violates primary key'))
    assert not ledger_charge.is_conflict(duckdb.ConstraintException("CHECK constraint failed"))
    assert not ledger_charge.is_conflict(BudgetExceeded("over", "lower ε"))
