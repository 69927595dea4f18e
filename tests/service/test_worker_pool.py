"""The service's worker pool (`service.worker_pool`): a thread per Session taking requests from
one line, so a worker that finishes takes the next request without the event loop; what a
cancelled request does (waiting: never runs; running: waited for, then cancelled)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import duckdb
import pytest

from pcor_sql.service.worker_pool import WorkerPool

WAIT_S = 10


@pytest.fixture
def pool():
    owner = SimpleNamespace(con=duckdb.connect(), ledger=None, session=SimpleNamespace(registry=None))
    made = WorkerPool(owner, 2)
    yield made
    made.close()
    owner.con.close()


def test_each_session_has_a_thread_of_its_own_and_requests_keep_their_order(pool):
    seen: list[tuple[int, str, int]] = []

    def work(i):
        def run(session):
            seen.append((i, threading.current_thread().name, id(session)))
            return i * i
        return run

    async def main():
        one_by_one = [await pool.run(work(i)) for i in range(6)]
        return one_by_one + list(await asyncio.gather(*(pool.run(work(i)) for i in range(6, 12))))

    assert asyncio.run(main()) == [i * i for i in range(12)]
    by_thread: dict[str, set[int]] = {}
    for _, name, session in seen:
        by_thread.setdefault(name, set()).add(session)
    assert set(by_thread) <= {"pcor-worker-0", "pcor-worker-1"}
    assert all(len(sessions) == 1 for sessions in by_thread.values())  # one Session per thread, always
    assert [i for i, *_ in seen[:6]] == list(range(6))
    assert pool.load() == (0, 0)


def test_a_worker_takes_the_next_request_while_the_event_loop_is_busy():
    """The next waiting request starts as the previous one ends, even while the event loop does
    not run (with an anyio limiter, it would start only once the loop released it)."""
    owner = SimpleNamespace(con=duckdb.connect(), ledger=None, session=SimpleNamespace(registry=None))
    one = WorkerPool(owner, 1)
    second_started = threading.Event()

    async def main():
        first = asyncio.ensure_future(one.run(lambda s: "first"))
        second = asyncio.ensure_future(one.run(lambda s: second_started.set() or "second"))
        await asyncio.sleep(0)  # both enqueued
        await asyncio.sleep(0)
        # The loop is blocked here: only the worker thread can start the second request.
        started = second_started.wait(WAIT_S)
        return started, await first, await second

    try:
        assert asyncio.run(main()) == (True, "first", "second")
    finally:
        one.close()
        owner.con.close()


def test_a_request_cancelled_while_it_waits_never_runs(pool):
    release, ran = threading.Event(), []

    def block(session):
        release.wait(WAIT_S)

    async def main():
        busy = [asyncio.ensure_future(pool.run(block)) for _ in range(2)]
        waiting = asyncio.ensure_future(pool.run(lambda s: ran.append("late")))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if pool.load() == (2, 1):
                break
        assert pool.load() == (2, 1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.load() == (2, 0)
        release.set()
        await asyncio.gather(*busy)

    asyncio.run(main())
    assert ran == [] and pool.load() == (0, 0)


def test_a_request_cancelled_while_it_runs_is_waited_for_then_ends_cancelled(pool):
    started, release, finished = threading.Event(), threading.Event(), []

    def slow(session):
        started.set()
        release.wait(WAIT_S)
        finished.append(True)
        return "done"

    async def main():
        task = asyncio.ensure_future(pool.run(slow))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # the work is still running: the request waits for it
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert finished == [True] and pool.load() == (0, 0)


def test_an_error_of_the_work_reaches_the_request(pool):
    def fail(session):
        raise ValueError("from the worker")

    async def main():
        with pytest.raises(ValueError, match="from the worker"):
            await pool.run(fail)
        return await pool.run(lambda s: "still serving")

    assert asyncio.run(main()) == "still serving"


def test_close_ends_the_threads():
    owner = SimpleNamespace(con=duckdb.connect(), ledger=None, session=SimpleNamespace(registry=None))
    made = WorkerPool(owner, 2)
    before = set(threading.enumerate())
    asyncio.run(made.run(lambda s: None))
    threads = [t for t in set(threading.enumerate()) - before if t.name.startswith("pcor-worker-")]
    assert len(threads) == 2
    made.close()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(t.is_alive() for t in threads)
    owner.con.close()


def test_closing_ends_the_requests_in_line_as_interrupted_and_refuses_new_ones():
    """A request still in line when the pool closes never runs: it ends with `Stopping` (the
    service answers 503, interrupted), as does one that arrives after; the running one finishes."""
    from pcor_sql.core.work import Stopping

    owner = SimpleNamespace(con=duckdb.connect(), ledger=None, session=SimpleNamespace(registry=None))
    one = WorkerPool(owner, 1)
    started, release, ran = threading.Event(), threading.Event(), []

    def slow(session):
        started.set()
        release.wait(WAIT_S)
        return "finished"

    async def caught(work):
        # As the service's handler does (`http_plumbing`): within the request's own task, since a
        # KeyboardInterrupt (Stopping is one) that leaves a task stops the event loop itself.
        try:
            return await one.run(work)
        except Stopping:
            return "interrupted"

    async def main():
        running = asyncio.ensure_future(caught(slow))
        waiting = asyncio.ensure_future(caught(lambda s: ran.append("late")))
        for _ in range(int(WAIT_S * 100)):
            if started.is_set() and one.load() == (1, 1):
                break
            await asyncio.sleep(0.01)
        one.close()
        assert await waiting == "interrupted"
        assert await caught(lambda s: ran.append("after")) == "interrupted"
        release.set()
        return await running

    try:
        assert asyncio.run(main()) == "finished"
        assert ran == [] and one.load() == (0, 0)
    finally:
        owner.con.close()
