"""Reservations (`Ledger.reserve`): charged before the work, the history says 'running' until
an outcome; the first outcome wins; an owner's refund gives exactly the ε back; a process
killed between its reservation and its outcome shows up as 'interrupted' (still charged)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from pcor_sql.core.accounting import DpCost, OcdpCost
from pcor_sql.errors import BudgetExceeded, InternalError, Refused, UserError
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.transactions import utc_now

from ledger_helpers import ledger_rows, raw, subprocess_env

WORKER = Path(__file__).with_name("reserve_worker.py")
pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def item(epsilon: float, release_id: str | None = None, **extra) -> ChargeItem:
    return ChargeItem(release_id or new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", "id = 42", **extra)


def raw_history(ledger) -> list[tuple]:
    return raw(ledger, "SELECT release_id, unit, outcome, reason, refunded, pid, host, process_token"
                       " FROM pcor.history ORDER BY release_id, unit")


def test_a_reservation_charges_at_once_and_says_running(con, ledger):
    ledger.set_limit("t1", 1.0)
    ledger.set_limit("t2", 0.5)
    r = ledger.reserve(["t1", "t2"], [item(0.2, "a"), item(0.1, "b")])
    assert r.release_ids == ("a", "b")
    # t2 has the least headroom: its total after the charge and its limit.
    assert (r.spent, r.limit) == (pytest.approx(0.3), 0.5)
    assert ledger.status("t1").spent == pytest.approx(0.3) and ledger.status("t2").spent == pytest.approx(0.3)
    rows = raw_history(ledger)
    assert [(rid, unit, outcome) for rid, unit, outcome, *_ in rows] == [
        ("a", "t1", "running"), ("a", "t2", "running"), ("b", "t1", "running"), ("b", "t2", "running")]
    assert {(pid, host) for *_, pid, host, _ in rows} == {(os.getpid(), socket.gethostname())}
    assert all(token for *_, token in rows)
    assert r.answered() is True
    assert {outcome for _, _, outcome, *_ in raw_history(ledger)} == {"answered"}
    assert ledger.verify() == []


def test_a_refused_reservation_writes_nothing(con, ledger):
    ledger.set_limit("t", 0.5)
    ledger.reserve("t", [item(0.4)]).answered()
    before = ledger_rows(ledger)
    with pytest.raises(BudgetExceeded, match="remaining 0.1"):
        ledger.reserve("t", [item(0.2)])
    with pytest.raises(Refused, match="no ocdp limit"):  # strict: a unit without a limit
        ledger.reserve(["t", "other"], [item(0.01)])
    assert ledger_rows(ledger) == before


def outcome(act) -> str:
    try:
        act()
    except (BudgetExceeded, Refused) as exc:
        return f"{type(exc).__name__}: {exc.problem}"
    return "fits"


#: (ε of each item, units, analyst, what only the reservation checks refuses it: strictness, who).
FIT_CASES = [
    ([0.1], ["t"], None, False), ([0.35], ["t"], None, False), ([0.1], ["t"], "ana", False),
    ([0.15], ["t"], "ana", False), ([0.05, 0.05], ["t"], "ana", False), ([0.06, 0.06], ["t"], "ana", False),
    ([0.35], ["t", "pub"], "ana", False), ([0.01], ["t", "other"], None, True), ([0.01], ["t"], "nobody", True),
]


@pytest.mark.parametrize(("epsilons", "units", "analyst", "left"), FIT_CASES)
def test_check_fit_refuses_as_the_reservation_would_and_writes_nothing(con, ledger, epsilons, units, analyst, left):
    from pcor_sql.ledger.analysts import add_analyst
    from pcor_sql.ledger.reservation import check_fit

    ledger.set_limit("t", 0.5)
    ledger.set_public("pub")
    add_analyst(ledger, "ana", quota=0.3)
    ledger.reserve("t", [item(0.2, role="analyst")], analyst="ana").answered()
    ledger.reserve("t", [item(0.1)]).answered()  # t: 0.3 of 0.5 spent; ana: 0.2 of her 0.3
    items = [item(e, role="analyst" if analyst else "owner") for e in epsilons]
    before = ledger_rows(ledger)
    checked = outcome(lambda: check_fit(ledger, units, items, analyst))
    assert ledger_rows(ledger) == before
    reserved = outcome(lambda: ledger.reserve(units, items, analyst=analyst))
    if left:  # an early check that passes decides nothing: the reservation still refuses
        assert checked == "fits" and "Refused: " in reserved
    else:
        assert checked == reserved


def test_check_fit_applies_the_default_limit(con, ledger):
    from pcor_sql.ledger.reservation import check_fit

    ledger.set_default_limit(0.3)
    ledger.reserve("fresh", [item(0.2)]).answered()
    for epsilon in (0.1, 0.15):
        items = [item(epsilon)]
        assert outcome(lambda: check_fit(ledger, ["fresh"], items, None)) == outcome(
            lambda: ledger.reserve(["fresh"], items))
    assert ledger.status("fresh").spent == pytest.approx(0.3)


def test_the_first_outcome_wins(con, ledger):
    r = ledger.reserve("t", [item(0.3)])
    assert r.answered() is True
    assert r.failed("internal", refund=True) is False  # too late: nothing given back
    assert r.interrupted(refund=False) is False
    [record] = ledger.history("t")
    assert (record.outcome, record.refunded, ledger.status("t").spent) == ("answered", False, 0.3)


def test_an_outcome_is_written_in_turn_with_the_charges_of_this_process(duckdb_ledger):
    """An outcome appends to its units' history chains (DESIGN.md §11), as a charge does, so it
    waits for this process's write transaction in progress (beside it, the two would write one
    chain head), and both end consistent."""
    ledger = duckdb_ledger
    ledger.set_limit("t", 1.0)
    answered, refunded = ledger.reserve("t", [item(0.1)]), ledger.reserve("t", [item(0.2)])
    done: dict[str, bool] = {}
    threads = [threading.Thread(target=lambda: done.setdefault("answered", answered.answered())),
               threading.Thread(target=lambda: done.setdefault("refunded", refunded.failed("data", refund=True)))]
    with ledger.store._write_lock:  # a charge of another thread, in progress
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=0.2)
        assert done == {} and all(t.is_alive() for t in threads)
    for t in threads:
        t.join(timeout=30)
    assert done == {"answered": True, "refunded": True}
    assert ledger.status("t").spent == pytest.approx(0.1) and ledger.verify() == []


def test_an_owners_failure_is_refunded_exactly(con, ledger):
    ledger.set_limit("t", 1.0)
    kept = [ledger.reserve("t", [item(0.1)]) for _ in range(3)]
    failing = ledger.reserve("t", [item(0.3)])
    for r in kept:
        r.answered()
    assert failing.failed("data", refund=True) is True
    assert ledger.status("t").spent == pytest.approx(0.3, abs=1e-15)
    shown = [r.shown_outcome for r in ledger.history("t")]
    assert shown == ["answered"] * 3 + ["failed: data (not charged)"]
    assert ledger.verify() == []
    # The ε given back can be spent again, up to the limit and no further.
    ledger.reserve("t", [item(0.7)]).answered()
    with pytest.raises(BudgetExceeded):
        ledger.reserve("t", [item(0.01)])


def test_an_interrupt_stays_charged_unless_refunded(ledger):
    ledger.reserve("t", [item(0.2)]).interrupted(refund=False)
    ledger.reserve("t", [item(0.5)]).interrupted(refund=True)
    assert [(r.outcome, r.refunded) for r in ledger.history("t")] == [("interrupted", False), ("interrupted", True)]
    assert ledger.status("t").spent == pytest.approx(0.2)
    assert ledger.verify() == []


def test_an_analysts_charge_is_never_refunded(ledger):
    r = ledger.reserve("t", [item(0.2, role="analyst")])
    with pytest.raises(InternalError, match="never refunded"):
        r.failed("not-found", refund=True)
    assert r.failed("not-found", refund=False) is True
    assert ledger.status("t").spent == 0.2


def test_a_block_left_without_an_outcome_records_one(ledger):
    with pytest.raises(KeyboardInterrupt):
        with ledger.reserve("t", [item(0.2, "ctrl-c")]):
            raise KeyboardInterrupt
    with pytest.raises(ZeroDivisionError):
        with ledger.reserve("t", [item(0.1, "bug")]):
            1 / 0
    assert [(r.release_id, r.outcome, r.reason, r.refunded) for r in ledger.history("t")] == [
        ("ctrl-c", "interrupted", None, False), ("bug", "failed", "internal", False)]


def test_reasons_are_short_classes(ledger):
    r = ledger.reserve("t", [item(0.1)])
    for bad in ("", "x" * 65, "two\nlines", 3):
        with pytest.raises(InternalError):
            r.failed(bad, refund=False)
    assert r.outcome is None and r.failed("no-valid-context", refund=False)


def test_a_repeated_reservation_is_not_charged_twice(ledger):
    first = ledger.reserve("t", [item(0.2, "same")])
    again = ledger.reserve("t", [item(0.2, "same")])
    assert ledger.status("t").spent == 0.2 and len(ledger.history("t")) == 1
    assert again.answered() is True and first.answered() is False


def test_the_slack_on_a_limit_is_relative(ledger):
    ledger.set_limit("tiny", 1e-13)
    outcomes = []
    for _ in range(11):
        try:
            ledger.reserve("tiny", [item(1e-14)]).answered()
            outcomes.append("charged")
        except BudgetExceeded:
            outcomes.append("refused")
    # An absolute slack of 1e-12 let all 11 through (11× the limit); now exactly 10 fit.
    assert outcomes == ["charged"] * 10 + ["refused"]
    ledger.set_limit("d", 0.3)
    ledger.reserve("d", [item(0.1)])
    ledger.reserve("d", [item(0.2)])  # 0.1 + 0.2 = 0.30000000000000004 still fits 0.3
    with pytest.raises(BudgetExceeded):
        ledger.reserve("d", [item(0.3 * 1e-9 * 2)])


def test_huge_numbers_are_one_line_errors(ledger):
    with pytest.raises(UserError, match="finite number > 0, got an integer of about 401 digits"):
        ledger.set_limit("t", 10**400)
    with pytest.raises(UserError, match="finite number > 0"):
        ledger.reserve("t", [ChargeItem("r", OcdpCost(10**400), "m")])
    with pytest.raises(UserError, match="finite number > 0"):
        ledger.check_fit("t", [ChargeItem("r", OcdpCost(10**400), "m")])


def test_a_reservation_takes_one_notion(ledger):
    with pytest.raises(InternalError, match="mixes"):
        ledger.reserve("t", [item(0.1), ChargeItem(new_release_id(), DpCost(0.1), "m")])


@pytest.mark.parametrize("sharing", ["a ledger per cursor", "one shared ledger"])
def test_threads_reserving_and_refunding_never_overspend(con, sharing):
    shared = Ledger(con)
    shared.set_limit("d", 1.0)
    cursors = [con.cursor() for _ in range(4)]
    outcomes: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(index: int) -> None:
        try:
            ledger = Ledger(cursors[index]) if sharing == "a ledger per cursor" else shared
            start.wait()
            for attempt in range(10):
                try:
                    r = ledger.reserve("d", [item(0.1, f"t{index}-{attempt}")])
                except BudgetExceeded:
                    outcomes.append("refused")
                    continue
                if attempt % 3 == 0:  # an owner's failure: refunded, so it may be spent again
                    r.failed("data", refund=True)
                    outcomes.append("refunded")
                else:
                    r.answered()
                    outcomes.append("answered")
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    ledger = Ledger(con)
    assert outcomes.count("answered") == 10 == round(ledger.status("d").spent / 0.1)
    assert ledger.verify() == []
    kept = [r for r in ledger.history("d") if not r.refunded]
    assert len(kept) == 10 and all(r.outcome == "answered" for r in kept)
    for cursor in cursors:
        cursor.close()


def test_a_process_killed_between_reservation_and_outcome_shows_interrupted(tmp_path):
    path = tmp_path / "served.duckdb"
    setup = duckdb.connect(str(path))
    Ledger(setup).set_limit("t", 1.0)
    setup.close()
    child = subprocess.Popen([sys.executable, str(WORKER), "hold", str(path), "t", "0.25"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        line = child.stdout.readline().strip()
        assert line.startswith("reserved "), child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    con = duckdb.connect(str(path))
    ledger = Ledger(con)
    [record] = ledger.history("t")
    assert (record.release_id, record.outcome, record.reason, record.refunded) == (
        line.split()[1], "interrupted", "process ended", False)
    assert ledger.status("t").spent == 0.25  # still charged: it may have shown something
    assert ledger.verify() == []
    con.close()


def _lease(ledger, host: str, pid: int, token: str, seconds: float) -> None:
    """A lease of holder (host, pid, token) expiring `seconds` from now (negative: lapsed)."""
    expires = utc_now() + dt.timedelta(seconds=seconds)
    raw(ledger, "INSERT INTO pcor.leases (host, pid, process_token, expires_at, renewed_at) VALUES ($1, $2, $3, $4, $5)",
        [host, pid, token, expires, utc_now()])


def test_running_rows_are_left_alone_while_their_holder_holds_a_lease(ledger, reopen, store_kind):
    """DESIGN.md §11 "Dead hosts": the lease decides, on any host; the embedded store also marks
    at once the rows of this host's processes that ended (one process writes it at a time)."""
    for rid in ("mine", "elsewhere", "lapsed", "dead"):
        ledger.reserve("t", [item(0.1, rid)])
    token = raw(ledger, "SELECT process_token FROM pcor.history WHERE release_id = 'mine'")[0][0]
    raw(ledger, "UPDATE pcor.history SET host = 'another-host', pid = 1 WHERE release_id = 'elsewhere'")
    _lease(ledger, "another-host", 1, token, 3600)
    raw(ledger, "UPDATE pcor.history SET host = 'third-host', pid = 2 WHERE release_id = 'lapsed'")
    _lease(ledger, "third-host", 2, token, -1)
    # A pid that cannot be running (beyond pid_max) on this host, with a token and a live lease of its own.
    raw(ledger, "UPDATE pcor.history SET pid = 4194305, process_token = 'x:1' WHERE release_id = 'dead'")
    _lease(ledger, socket.gethostname(), 4194305, "x:1", 3600)
    reopened = reopen()
    found = {r.release_id: (r.outcome, r.reason) for r in reopened.history("t")}
    assert found == {"mine": ("running", None), "elsewhere": ("running", None),
                     "lapsed": ("interrupted", "lease lapsed"),
                     "dead": ("interrupted", "process ended") if store_kind == "duckdb" else ("running", None)}
    assert reopened.status("t").spent == pytest.approx(0.4)  # still charged
    # Each change of outcome is linked into the chain: only the test's own edits of the holders differ.
    assert {d.problem for d in reopened.verify()} == {"pid, host differ from the chain",
                                                      "pid, process_token differ from the chain"}
    assert raw(reopened, "SELECT host FROM pcor.leases WHERE host = 'third-host'") == []  # the lapsed lease removed


def test_a_reservation_is_seven_statements_and_its_outcome_five(con, duckdb_ledger):
    """BEGIN, one SELECT, two writes (the history's INSERT returns its rows), the chain's two
    (the entries and the head written: `duckdb_chain`; its rows and head kept in process,
    `duckdb_chain_memory`), COMMIT; the outcome's UPDATE (returning its rows) and the chain's two
    in one transaction. The first reservation of a process takes its lease first (`leases`): one
    statement more (the ledger's opening has just looked at the lapsed leases), and reads its
    chain's head: one more."""
    ledger = duckdb_ledger
    ledger.set_limit("t", 1.0)
    con.execute("CALL enable_logging('QueryLog')")
    ledger.reserve("t", [item(0.1)]).answered()
    first = _logged(con)
    assert "pcor.leases" in first[0] and len(first) == 1 + 8 + 5, first
    r = ledger.reserve("t", [item(0.1)])
    reserved = _logged(con)[len(first):]
    r.answered()
    assert (len(reserved), len(_logged(con)) - len(first) - len(reserved)) == (7, 5), _logged(con)
    assert ledger.verify() == []


def _logged(con) -> list[str]:
    rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog' ORDER BY timestamp").fetchall()
    return [m for (m,) in rows if "duckdb_logs" not in m and "enable_logging" not in m]
