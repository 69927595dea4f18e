"""Reservations carry a lease (DESIGN.md §11 "Dead hosts", `pcor_sql.ledger.leases`), on both
stores: renewed while the reservation runs, so a live request is never marked; a reservation
whose lease lapsed is marked interrupted — still charged — by whoever looks next (another
process's reservation or renewal, or an opening), whatever its pid or host; the change is in
the history's chain; a process killed mid-request has its rows interrupted after its lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import UserError
from pcor_sql.ledger import leases
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger

from ledger_helpers import raw, subprocess_env

WORKER = Path(__file__).with_name("reserve_worker.py")
pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")
#: A short lease, so that tests see it lapse; renewed every LEASE / 3.
LEASE = 0.6


def item(epsilon: float, release_id: str | None = None) -> ChargeItem:
    return ChargeItem(release_id or new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", "id = 42")


def outcomes(ledger: Ledger) -> dict[str, tuple[str, str | None]]:
    return {r.release_id: (r.outcome, r.reason) for r in ledger.history()}


def expiry(ledger: Ledger):
    host, pid, token = leases.holder()
    rows = raw(ledger, "SELECT expires_at FROM pcor.leases WHERE host = $1 AND pid = $2 AND process_token = $3",
               [host, pid, token])
    return rows[0][0] if rows else None


def until(condition, seconds: float = 20.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def test_a_running_reservation_keeps_its_lease_and_stays_running(ledger, reopen):
    ledger = reopen(lease_seconds=LEASE)
    r = ledger.reserve("t", [item(0.1, "long")])
    first = expiry(ledger)
    assert first is not None
    assert until(lambda: expiry(ledger) > first)  # renewed by the thread while it runs
    time.sleep(3 * LEASE)
    other = reopen(lease_seconds=LEASE)  # an opening looks: the lease is live
    other.reserve("t", [item(0.1, "next")]).answered()  # and so does a reservation
    assert outcomes(other)["long"] == ("running", None)
    assert r.answered() is True and outcomes(other)["long"] == ("answered", None)
    other.close()
    ledger.close()  # its renewing thread ended before the connection closes


def test_an_idle_process_keeps_no_thread_and_closing_removes_its_lease(ledger, reopen):
    ledger = reopen(lease_seconds=LEASE)
    ledger.reserve("t", [item(0.1)]).answered()
    assert until(lambda: ledger.lease._thread is None, 5)
    assert expiry(ledger) is not None
    ledger.close()
    assert expiry(reopen()) is None


def test_a_lapsed_lease_is_marked_interrupted_by_whoever_looks_next(ledger, reopen):
    """The rows of a holder whose lease lapsed — any host, any pid — are interrupted (still
    charged) by another process's look, and the change is linked into the chain."""
    ledger.set_limit("t", 1.0)
    ledger.reserve("t", [item(0.25, "dead")])
    ledger.reserve("t", [item(0.25, "alive")])
    raw(ledger, "UPDATE pcor.history SET host = 'gone-host', pid = 7 WHERE release_id = 'dead'")
    raw(ledger, "INSERT INTO pcor.leases (host, pid, process_token, expires_at, renewed_at)"
                " SELECT 'gone-host', 7, process_token, renewed_at, renewed_at FROM pcor.leases")  # lapsed
    other = reopen(lease_seconds=LEASE)
    assert outcomes(other) == {"dead": ("interrupted", "lease lapsed"), "alive": ("running", None)}
    assert other.status("t").spent == 0.5  # still charged
    assert {d.problem for d in other.verify()} == {"pid, host differ from the chain"}  # the test's edit, and only it
    assert raw(other, "SELECT count(*) FROM pcor.leases WHERE host = 'gone-host'") == [(0,)]


def test_a_stalled_process_finds_its_rows_interrupted_and_keeps_the_charge(ledger, reopen):
    ledger.set_limit("t", 1.0)
    stalled = ledger.reserve("t", [item(0.5, "slow")])
    raw(ledger, "UPDATE pcor.leases SET expires_at = renewed_at")  # as if it had not renewed in time
    other = reopen()
    assert outcomes(other)["slow"] == ("interrupted", "lease lapsed")
    assert stalled.answered() is False  # the first outcome wins
    assert outcomes(other)["slow"] == ("interrupted", "lease lapsed") and other.status("t").spent == 0.5
    assert other.verify() == []


def test_a_killed_process_has_its_rows_interrupted_after_its_lease(ledger_on, store_kind, tmp_path, con):
    """A real process reserves, holds, and is killed -9; once its lease lapses, another
    process's next reservation marks its row interrupted. On PostgreSQL nothing but the lease
    decides it: its row stays running until the lease lapses."""
    if store_kind == "postgresql":
        ledger = ledger_on(con, lease_seconds=LEASE)
        target = ledger.store.url
    else:
        import duckdb

        path = tmp_path / "ledger.duckdb"
        target = str(path)
    env = {**subprocess_env(), leases.ENV: "3"}
    child = subprocess.Popen([sys.executable, str(WORKER), "hold", target, "t", "0.25"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline().strip()
        assert line.startswith("reserved "), child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    killed_at = time.monotonic()
    rid = line.split()[1]
    if store_kind == "duckdb":
        ledger = Ledger(duckdb.connect(str(path)), owned=True, lease_seconds=LEASE)
        assert outcomes(ledger)[rid] == ("interrupted", "process ended")  # the embedded store: at once
    else:
        assert outcomes(ledger)[rid] == ("running", None)  # its lease is live: the pid decides nothing
        assert until(lambda: (ledger.reserve("t", [item(0.01)]).answered() and False)
                     or outcomes(ledger)[rid][0] == "interrupted", 30, 0.2)
        assert time.monotonic() - killed_at >= 3 - 1.0  # not before its lease lapsed (3 s)
        assert outcomes(ledger)[rid] == ("interrupted", "lease lapsed")
    assert ledger.status("t").spent >= 0.25 and ledger.verify() == []


def test_the_lease_length_is_checked(monkeypatch):
    monkeypatch.setenv(leases.ENV, "soon")
    with pytest.raises(UserError, match="PCOR_SQL_LEASE_SECONDS"):
        leases.lease_seconds()
    monkeypatch.setenv(leases.ENV, "2.5")
    assert leases.lease_seconds() == 2.5 and leases.lease_seconds(7) == 7.0
    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(UserError):
            leases.lease_seconds(bad)


def test_a_reservation_under_a_lapsed_lease_renews_it_first(ledger, reopen):
    ledger = reopen(lease_seconds=LEASE)
    ledger.reserve("t", [item(0.1)]).answered()
    time.sleep(LEASE)  # idle: nothing renewed it
    before = expiry(ledger)
    r = ledger.reserve("t", [item(0.1, "fresh")])
    assert expiry(ledger) > before  # renewed before the reservation was made
    reopen()  # an opening right after sees a live lease
    assert outcomes(ledger)["fresh"] == ("running", None)
    r.answered()
