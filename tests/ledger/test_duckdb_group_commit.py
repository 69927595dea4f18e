"""Group commit in the embedded store (`ledger.duckdb_group_commit`): transactions that queue on
the write lock commit together, and every caller gets what it would have got alone — the same
totals, history and verifiable chain as serial charging; a failing body leaves no trace; a
refusal reaches its caller with nothing written; callbacks only after the group's COMMIT."""

from __future__ import annotations

import threading
import warnings
from collections import deque
from typing import Any

import duckdb
import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import BudgetExceeded, PrivacyWarning
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.duckdb_chain_memory import HeadMemory
from pcor_sql.ledger.duckdb_group_commit import GroupCommit
from pcor_sql.ledger.reservation import reserve_body
from pcor_sql.ledger.store import Ledger

WAIT = 30.0  # seconds: every wait below is bounded by it


def _ledger(con: duckdb.DuckDBPyConnection) -> Ledger:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return Ledger(con)


def _warm(ledger: Ledger) -> None:
    """One charge first: it renews the ledger's lease (a transaction of its own under the write
    lock), which the charges queued below then need not."""
    ledger.set_limit("t", 100.0)
    ledger.reserve("t", [_item("warm")]).answered()


def _item(release_id: str, epsilon: float = 0.1) -> ChargeItem:
    return ChargeItem(release_id, OcdpCost(epsilon), "bfs")


class _Counted(deque):
    """A queue that tells the test each time a caller joins it."""

    def __init__(self) -> None:
        super().__init__()
        self.joined = threading.Semaphore(0)

    def append(self, item: Any) -> None:
        super().append(item)
        self.joined.release()


def _queued_together(group: GroupCommit, lock: Any, works: list) -> list:
    """Run each of `works` in a thread of its own while the test holds the write lock, so that
    all of them queue; then let them go. What each returned or raised, in order."""
    queue = group._queue = _Counted()
    results: list[Any] = [None] * len(works)

    def run(index: int) -> None:
        try:
            results[index] = works[index]()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(works))]
    with lock:
        for thread in threads:
            thread.start()
        for _ in works:
            assert queue.joined.acquire(timeout=WAIT), "a transaction never queued"
    for thread in threads:
        thread.join(timeout=WAIT)
        assert not thread.is_alive()
    return results


def _state(ledger: Ledger) -> tuple:
    """The totals, the history (the order of charges within a group may differ from serial
    charging: each unit's seqs and spent_after values are compared as sets) and the chains."""
    def rows(query: str) -> list[tuple]:
        return [tuple(r) for r in ledger.read_with(lambda ops: ops.raw(query, []))]

    budget = rows("SELECT unit, notion, round(spent_epsilon, 9), releases FROM pcor.budget ORDER BY unit, notion")
    history = rows("SELECT release_id, unit, epsilon, outcome FROM pcor.history ORDER BY release_id, unit")
    steps = rows("SELECT unit, list(seq ORDER BY seq), list(round(spent_after, 9) ORDER BY spent_after)"
                 " FROM pcor.history GROUP BY unit ORDER BY unit")
    links = rows("SELECT unit, count(*), max(link) FROM pcor.history_chain GROUP BY unit ORDER BY unit")
    return budget, history, steps, links


def test_threads_charging_at_once_commit_in_groups_as_serial_charging_would():
    ids = [f"r{i}" for i in range(8)]
    grouped, serial = _ledger(duckdb.connect()), _ledger(duckdb.connect())
    for ledger in (grouped, serial):
        _warm(ledger)
        ledger.set_limit("u", 100.0)
    store = grouped.store
    for turn in range(3):  # groups of reservations, then groups of their outcomes
        batch = [f"{i}-{turn}" for i in ids]
        reservations = _queued_together(store._group, store._write_lock,
                                        [lambda i=i: grouped.reserve(["t", "u"], [_item(i)]) for i in batch])
        _queued_together(store._group, store._write_lock, [lambda r=r: r.answered() for r in reservations])
        for i in batch:
            serial.reserve(["t", "u"], [_item(i)]).answered()
    assert store._group.sizes.get(8, 0) == 6  # every queue of 8 committed as one group
    assert _state(grouped) == _state(serial)
    assert grouped.verify() == [] and serial.verify() == []
    grouped.reserve("t", [_item("after")]).answered()  # the heads kept after the groups are right
    assert grouped.verify() == []


def test_threads_charging_freely_keep_the_totals_and_the_chain():
    ledger = _ledger(duckdb.connect())
    ledger.set_limit("t", 100.0)
    start, errors = threading.Barrier(6), []

    def work(index: int) -> None:
        try:
            start.wait(timeout=WAIT)
            for turn in range(5):
                ledger.reserve("t", [_item(f"{index}-{turn}")]).answered()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
    assert errors == []
    assert ledger.status("t").spent == pytest.approx(3.0)
    _, history, _, links = _state(ledger)
    assert len(history) == 30 and {r[3] for r in history} == {"answered"}
    assert links == [("t", 60, 60)]  # 30 charges and 30 outcomes, no link twice, none skipped
    assert ledger.verify() == []


def test_a_body_failing_after_a_write_leaves_no_trace_and_the_others_commit_once():
    ledger = _ledger(duckdb.connect())
    _warm(ledger)
    store = ledger.store

    def failing() -> None:
        def body(ops: Any) -> None:
            reserve_body(("t",), (_item("broken", 0.5),), None)(ops)  # its history, chain and spent written
            raise ValueError("fails after writing")
        ledger.transaction(body)

    works = [lambda i=i: ledger.reserve("t", [_item(f"ok{i}")]) for i in range(3)]
    results = _queued_together(store._group, store._write_lock, works[:2] + [failing] + works[2:])
    assert isinstance(results[2], ValueError)
    assert store._group.sizes.get(4, 0) == 0  # rolled back: each ran alone
    for reservation in results[:2] + results[3:]:
        reservation.answered()
    _, history, _, links = _state(ledger)
    assert [r[0] for r in history] == ["ok0", "ok1", "ok2", "warm"]
    assert ledger.status("t").spent == pytest.approx(0.4)
    assert links == [("t", 8, 8)]
    assert ledger.verify() == []


def test_a_refusal_inside_a_group_reaches_its_caller_with_nothing_written():
    ledger = _ledger(duckdb.connect())
    _warm(ledger)
    ledger.set_limit("t", 1.1)
    store = ledger.store
    works = [lambda i=i: ledger.reserve("t", [_item(f"r{i}", 0.4)]) for i in range(3)]
    results = _queued_together(store._group, store._write_lock, works)
    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    charged = [r for r in results if not isinstance(r, BaseException)]
    assert len(refused) == 1 and len(charged) == 2
    for reservation in charged:
        reservation.answered()
    _, history, _, _ = _state(ledger)
    assert sorted(r[0] for r in history) == sorted([r.release_ids[0] for r in charged] + ["warm"])
    assert ledger.status("t").spent == pytest.approx(0.9)
    assert ledger.verify() == []


def test_single_and_beside_transactions_are_not_grouped(monkeypatch):
    ledger = _ledger(duckdb.connect())
    group = ledger.store._group
    calls: list[int] = []
    real = group.run
    monkeypatch.setattr(group, "run", lambda *a: (calls.append(1), real(*a))[1])
    ledger.transaction(lambda ops: ops.raw("SELECT 1", []), single=True)
    ledger.transaction(lambda ops: ops.raw("SELECT 1", []), single=True, beside=True)
    ledger.transaction(lambda ops: ops.raw("SELECT 1", []), beside=True)
    assert calls == []
    ledger.transaction(lambda ops: ops.raw("SELECT 1", []))
    assert calls == [1]


class _Cursor:
    def __init__(self, log: list, fail_commit: bool):
        self.log, self.fail_commit = log, fail_commit

    def execute(self, statement: str) -> None:
        self.log.append(statement)
        if statement == "COMMIT" and self.fail_commit:
            raise duckdb.IOException("Could not write (injected)")

    def close(self) -> None:
        pass


def _fake_group(log: list, fail_commit: bool, size: int = 8) -> tuple[GroupCommit, threading.RLock]:
    lock = threading.RLock()

    def alone(body: Any, committed: Any) -> Any:
        log.append("alone")
        result = body(_Cursor(log, False))
        committed(True)
        return result

    return GroupCommit(lock, HeadMemory(), lambda: _Cursor(log, fail_commit), alone, size=size), lock


class _Written:
    rewrote, heads = False, {}


@pytest.mark.parametrize("fail_commit", [False, True])
def test_callbacks_run_once_each_and_only_after_a_commit_that_succeeded(fail_commit):
    log: list = []
    group, lock = _fake_group(log, fail_commit)

    def work(name: str) -> Any:
        return lambda: group.run(lambda cur, heads: (log.append(name), name)[1],
                                 lambda locked: log.append(f"committed {name}"), lambda: _Written())

    results = _queued_together(group, lock, [work("a"), work("b"), work("c")])
    assert results == ["a", "b", "c"]
    assert sorted(x for x in log if x.startswith("committed")) == ["committed a", "committed b", "committed c"]
    if not fail_commit:
        assert log.index("COMMIT") < min(log.index(f"committed {n}") for n in "abc")
        assert log.count("alone") == 0
    else:  # the group's COMMIT failed: none of its callbacks ran; each ran alone and committed
        assert log.count("alone") == 3
        assert log.index("ROLLBACK") < min(log.index(f"committed {n}") for n in "abc")


def test_a_group_takes_at_most_its_size():
    log: list = []
    group, lock = _fake_group(log, False, size=3)
    works = [lambda i=i: group.run(lambda cur, heads: i, lambda locked: None, lambda: _Written()) for i in range(7)]
    assert _queued_together(group, lock, works) == list(range(7))
    assert max(group.sizes) <= 3 and sum(n * c for n, c in group.sizes.items()) == 7


def test_what_queues_while_a_body_runs_joins_the_group_before_its_commit():
    """Two writers: one runs while the other queues, and the second rides on the first's COMMIT."""
    log: list = []
    group, _ = _fake_group(log, False)
    queue = group._queue = _Counted()
    second: list = []

    def first_body(cur: Any, heads: Any) -> str:
        thread = threading.Thread(target=lambda: second.append(group.run(
            lambda cur, heads: (log.append("b"), "b")[1], lambda locked: log.append("committed b"), lambda: _Written())))
        thread.start()
        assert queue.joined.acquire(timeout=WAIT)  # b waits on the lock this thread holds
        second.append(thread)
        log.append("a")
        return "a"

    assert group.run(first_body, lambda locked: log.append("committed a"), lambda: _Written()) == "a"
    second[0].join(timeout=WAIT)
    assert second[1:] == ["b"]
    assert group.sizes == {2: 1}
    assert log.count("COMMIT") == 1 and log.index("b") < log.index("COMMIT") < log.index("committed b")


def test_an_interrupt_in_a_group_reaches_its_caller_and_the_others_run_alone():
    log: list = []
    group, lock = _fake_group(log, False)

    def interrupted(cur: Any, heads: Any) -> None:
        log.append("interrupted")
        raise KeyboardInterrupt

    works = [lambda: group.run(lambda cur, heads: "a", lambda locked: log.append("committed a"), lambda: _Written()),
             lambda: group.run(interrupted, lambda locked: log.append("committed x"), lambda: _Written()),
             lambda: group.run(lambda cur, heads: "c", lambda locked: log.append("committed c"), lambda: _Written())]
    results = _queued_together(group, lock, works)
    assert results[0] == "a" and results[2] == "c" and isinstance(results[1], KeyboardInterrupt)
    assert log.count("interrupted") == 1 and "committed x" not in log  # not run again
    assert log.count("alone") == 2 and "COMMIT" not in log[:log.index("ROLLBACK")]


def test_a_lone_body_that_refuses_runs_once_and_its_caller_gets_the_refusal():
    """Alone in its group, a body's own refusal is rolled back and handed over: running it again
    alone would give the same, after repeating its reads."""
    log: list = []
    group, _ = _fake_group(log, False)

    def refusing(cur: Any, heads: Any) -> None:
        log.append("refusing")
        raise BudgetExceeded("the budget is spent", "ask the owner for more")

    with pytest.raises(BudgetExceeded):
        group.run(refusing, lambda locked: log.append("committed"), lambda: _Written())
    assert log.count("refusing") == 1 and "alone" not in log and "committed" not in log
    assert "ROLLBACK" in log and "COMMIT" not in log


def test_a_lone_body_with_a_database_error_still_runs_alone_for_the_stores_retry():
    log: list = []
    group, _ = _fake_group(log, False)
    tries: list = []

    def conflicting(cur: Any, heads: Any) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise duckdb.TransactionException("Conflict on update (injected)")
        return "done"

    assert group.run(conflicting, lambda locked: log.append("committed"), lambda: _Written()) == "done"
    assert len(tries) == 2 and log.count("alone") == 1 and "committed" in log
