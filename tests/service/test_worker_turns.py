"""The worker pool's lines (`service.worker_pool`, DESIGN.md §8): one analyst's concurrent
requests use every free worker, and the analysts' lines are served in turn, so another
analyst's request waits for no more than the first running request to end."""

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


async def _until(condition, what):
    for _ in range(WAIT_S * 100):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


def test_one_askers_two_requests_run_on_both_workers_at_once(pool):
    both = threading.Barrier(2, timeout=WAIT_S)  # passes only if the two run at the same time

    async def main():
        return await asyncio.gather(*(pool.run(lambda s: both.wait() is not None, "alice") for _ in range(2)))

    assert asyncio.run(main()) == [True, True]


def test_another_askers_request_runs_before_the_first_askers_backlog(pool):
    release, order = threading.Event(), []

    def held(name):
        def run(session):
            order.append(name)
            release.wait(WAIT_S)
        return run

    async def main():
        alice = [asyncio.ensure_future(pool.run(held(f"alice{i}"), "alice")) for i in range(6)]
        await _until(lambda: pool.load() == (2, 4), "alice holds both workers, four of hers wait")
        bob = asyncio.ensure_future(pool.run(lambda s: order.append("bob"), "bob"))
        await _until(lambda: pool.load() == (2, 5), "bob waits too")
        release.set()
        await asyncio.gather(*alice, bob)

    asyncio.run(main())
    # Alice's first two ran; at the next free worker, bob's turn came before her third.
    assert order[:2] == ["alice0", "alice1"] and order.index("bob") <= 3, order
    assert [n for n in order if n != "bob"] == [f"alice{i}" for i in range(6)]  # her own order kept
    assert pool.load() == (0, 0)


def test_a_cancelled_request_leaves_its_askers_turn_clean(pool):
    release = threading.Event()

    async def main():
        busy = [asyncio.ensure_future(pool.run(lambda s: release.wait(WAIT_S), "alice")) for _ in range(2)]
        await _until(lambda: pool.load() == (2, 0), "both busy")
        waiting = asyncio.ensure_future(pool.run(lambda s: "never", "carol"))
        await _until(lambda: pool.load() == (2, 1), "carol waits")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        await asyncio.gather(*busy)
        return await pool.run(lambda s: "next", "carol")

    assert asyncio.run(main()) == "next"
    assert pool.load() == (0, 0)
