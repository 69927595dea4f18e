"""Several services, one ledger (DESIGN.md §11), below the processes: the identity generation
that every add, revoke and rotate raises in a shared store (none in the embedded one, whose
file lock makes one process its writer), the watch that turns a moved generation into
invalidated memories, and a store whose server is gone — one UserError of its own class, which
an analyst hears as the generic refusal."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

import pcor_sql
from pcor_sql import pipeline
from pcor_sql.errors import LedgerUnreachable, RequestFailed
from pcor_sql.ledger import analysts
from pcor_sql.service.ledger_watch import IdentityWatch


def test_each_identity_change_raises_the_generation_of_a_shared_store(ledger_on, store_kind):
    con = duckdb.connect()
    owner = pcor_sql.Owner(con, ledger_on(con), warn=lambda message: None)
    generation = lambda: owner.ledger.read(lambda ops: ops.identity_generation(), None)  # noqa: E731
    before = generation()
    if store_kind == "duckdb":
        assert before is None
        return
    owner.add_analyst("ann")
    analysts.rotate_analyst(owner.ledger, "ann")
    analysts.revoke_analyst(owner.ledger, "ann")
    analysts.set_quota(owner.ledger, "ann", 1.0)  # not an identity change
    assert generation() == before + 3


class _Ledger:
    """A ledger whose generation the test moves (or makes unreadable)."""

    def __init__(self) -> None:
        self.value: object = 0
        self.reads = 0  # how many times the watch has looked

    def read(self, body, empty):
        self.reads += 1
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def _wait(condition, timeout=5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def _looked(ledger: _Ledger, times: int) -> None:
    """Until the watch has read the generation `times` more times: a negative ("no call back")
    is asserted after reads that could have made one, not after a sleep that a loaded machine
    may pass without any."""
    seen = ledger.reads
    _wait(lambda: ledger.reads >= seen + times)


def test_the_watch_calls_back_when_the_generation_moves_or_cannot_be_read():
    ledger, calls = _Ledger(), []
    watch = IdentityWatch(ledger, lambda: calls.append(1), interval=0.01)
    assert watch.start()
    try:
        _looked(ledger, 3)
        assert calls == []  # standing still (three reads of the same generation): nothing invalidated
        ledger.value = 1
        _wait(lambda: len(calls) == 1)
        _looked(ledger, 3)
        assert len(calls) == 1  # and once moved, three more reads of it: invalidated once
        ledger.value = LedgerUnreachable("gone", "retry")
        _wait(lambda: len(calls) >= 3)  # every failed read invalidates again
    finally:
        watch.stop()


def test_no_watch_runs_on_a_store_kept_by_one_process():
    ledger = _Ledger()
    ledger.value = None
    assert not IdentityWatch(ledger, lambda: None).start()


def test_a_watch_invalidates_the_identities_kept_in_this_process():
    before = analysts.identity_changes()
    analysts.changed_elsewhere()
    assert analysts.identity_changes() == before + 1


def test_a_server_that_cannot_be_reached_is_one_line_of_its_own_class():
    pytest.importorskip("psycopg")
    from pcor_sql.ledger.postgres_store import PostgresStore

    with pytest.raises(LedgerUnreachable) as caught:
        PostgresStore("postgresql://nobody@127.0.0.1:1/none")
    assert "cannot reach the budget ledger at postgresql://nobody@127.0.0.1:1/none" in caught.value.problem
    assert "\n" not in caught.value.problem


def test_an_analyst_hears_an_unreachable_ledger_as_the_generic_refusal():
    policy = pipeline.analyst_policy("ann")
    with pytest.raises(RequestFailed) as caught:
        with pipeline.analyst_words(policy):
            raise LedgerUnreachable("the budget ledger at postgresql://db.internal/pcor cannot be reached", "retry")
    assert caught.value.problem == pipeline.failed().problem
    with pytest.raises(LedgerUnreachable):  # the owner hears it as it is
        with pipeline.analyst_words(pipeline.OWNER):
            raise LedgerUnreachable("the budget ledger cannot be reached", "retry")


def test_the_watch_thread_is_a_daemon_and_stops():
    ledger = _Ledger()
    watch = IdentityWatch(ledger, lambda: None, interval=0.01)
    watch.start()
    assert any(t.name == "pcor-identity-watch" and t.daemon for t in threading.enumerate())
    watch.stop()
    assert not watch._thread.is_alive()
