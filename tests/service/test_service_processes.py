"""The service's searches in search processes (DESIGN.md §10 "Reads in DuckDB, searches in workers"), over real HTTP on
127.0.0.1: a request's search runs in a child of the service, not in its thread; a child killed
with kill -9 costs its request one generic failure (charged, recorded), is replaced, and the
next request is answered; the ledger verifies; closing the service ends the children."""

from __future__ import annotations

import os
import signal

import duckdb
import httpx
import pytest

import pcor_sql
from pcor_sql.service import app
from tests.service.live_server import live_server


@pytest.fixture()
def owner():
    con = duckdb.connect()
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c', 'd')")
    con.execute("CREATE TABLE staff AS SELECT i AS id, (['a', 'b', 'c', 'd'])[i % 4 + 1]::dept AS dept,"
                " CASE WHEN i = 7 THEN 9000.0 ELSE 100.0 + i % 13 END AS pay FROM range(4000) t(i)")
    owner = pcor_sql.Owner(con, ledger=":memory:", warn=lambda message: None)
    owner.register("staff", "staff", key="id", metric="pay", by="dept", limit=100.0, releasable=[7])
    owner.token = owner.add_analyst("alice", quota=50.0)
    return owner


def explain(url, token, verifier="grubbs"):
    return httpx.post(url + "/v1/explain", json={"dataset": "staff", "keys": [7], "epsilon": 0.5, "verifier": verifier},
                      headers={"Authorization": f"Bearer {token}"}, timeout=60)


def test_a_request_searches_in_a_child_and_a_killed_child_is_replaced(owner):
    served = app(owner, workers=1, processes=True)
    pool = served.state.service.pool
    with live_server(served) as url:
        [pid] = pool.search_pids()
        assert pid != os.getpid() and os.path.exists(f"/proc/{pid}")
        first = explain(url, owner.token)
        assert first.status_code == 200, first.text
        assert sum(p.searched for p in pool._searches) == 1  # the search went to the child
        os.kill(pid, signal.SIGKILL)
        lost = explain(url, owner.token, "grubbs")
        assert lost.status_code == 422 and set(lost.json()) == {"error", "fix"}
        [fresh] = pool.search_pids()
        assert fresh != pid
        again = explain(url, owner.token)
        assert again.status_code == 200, again.text
    assert pool.search_pids() == [] and not os.path.exists(f"/proc/{fresh}")  # ended and reaped
    outcomes = [(h.outcome, h.reason) for h in owner.ledger.history() if h.analyst == "alice"]
    assert sorted(outcomes) == [("answered", None)] * 2 + [("interrupted", "worker-lost")], outcomes
    owner.ledger.verify()


def test_without_processes_the_threads_search(owner):
    served = app(owner, workers=1, processes=False)
    with live_server(served) as url:
        assert explain(url, owner.token).status_code == 200
        assert served.state.service.pool.search_pids() == []



def test_a_search_child_loads_every_built_in_verifiers_checks_before_serving():
    from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES
    from pcor_sql.service.search_child import warm_kernels

    assert warm_kernels() == list(BUILTIN_NAMES)  # each warm-up search ran to a release


def test_the_owner_sees_the_search_processes_and_their_replacements(owner):
    from pcor_sql.service.owner_app import owner_app
    from tests.service.live_server import live_listeners

    analysts = app(owner, workers=2, processes=True)
    owners = owner_app(analysts.state.service, "owner-token-for-the-test")
    with live_listeners(analysts, owners) as (url, owner_url):
        def workers(token="owner-token-for-the-test"):
            return httpx.get(owner_url + "/v1/owner/workers", headers={"Authorization": f"Bearer {token}"}, timeout=30)

        before = workers().json()
        assert before["workers"] == 2 and before["searches_in"] == "processes" and before["running"] == 0
        pids = [p["pid"] for p in before["search_processes"]]
        assert sorted(pids) == sorted(analysts.state.service.pool.search_pids())
        assert all(p["alive"] and p["started"] == 1 for p in before["search_processes"])
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for _ in range(2):  # each worker's next search finds its child dead and starts another
            explain(url, owner.token)
        after = workers().json()["search_processes"]
        assert sum(p["started"] for p in after) >= 3 and all(p["pid"] not in pids for p in after if p["started"] == 2)
        assert workers(owner.token).status_code == 401  # an analyst's token opens nothing here


def test_a_search_process_that_cannot_start_leaves_its_worker_searching_in_its_thread(owner, caplog):
    from pcor_sql.engine.search_processes import SearchProcess
    from pcor_sql.service.worker_pool import WorkerPool

    pool = WorkerPool(owner, 2)
    try:
        pool.start_processes()
        broken = pool.sessions()[0]
        broken.searches.close(kill=True)
        pool._searches.remove(broken.searches)
        broken.searches = SearchProcess(pool._shared, entry="pcor_sql.no_such_module")  # its child exits at once
        pool._searches.append(broken.searches)
        with caplog.at_level("WARNING", logger="pcor_sql.service"):
            pool.share_summaries()
        assert broken.searches is None and "could not start" in caplog.text
        assert len(pool.search_pids()) == 1  # the other worker keeps its search process
    finally:
        pool.close()


@pytest.mark.parametrize("threads, serving", [(None, 3), (1, 1), ("auto", 1)])
def test_duckdb_threads_are_set_once_the_summaries_are_built(owner, monkeypatch, threads, serving):
    """`duckdb_threads`: the warm-up builds on DuckDB's own setting, the service then serves on the
    one asked for (the owner's listener shows it): auto divides the setting among the workers
    (3 // 2); None leaves it as it was."""
    from pcor_sql.service.http_app import Service
    from pcor_sql.service.owner_app import owner_app
    from tests.service.live_server import live_listeners

    owner.con.execute("SET threads = 3")
    seen, real = [], Service.warm
    monkeypatch.setattr(Service, "warm", lambda self: (seen.append(setting(owner)), real(self))[1])
    analysts = app(owner, workers=2, processes=False, duckdb_threads=threads)
    owners = owner_app(analysts.state.service, "owner-token-for-the-test")
    with live_listeners(analysts, owners) as (url, owner_url):
        assert explain(url, owner.token).status_code == 200
        shown = httpx.get(owner_url + "/v1/owner/workers", timeout=30,
                          headers={"Authorization": "Bearer owner-token-for-the-test"}).json()["duckdb_threads"]
    assert seen == [3] and shown == setting(owner) == serving


def test_a_summary_built_while_serving_uses_every_core_again(owner, monkeypatch):
    """Served on one DuckDB thread (auto: 4 // 4 workers), a summary rebuilt while serving (here:
    every worker's cache dropped) is built on the owner's 4 threads, and serving goes on on 1."""
    from pcor_sql.backends.duckdb_access import DuckDBAccess

    owner.con.execute("SET threads = 4")
    during, real = [], DuckDBAccess.summary
    monkeypatch.setattr(DuckDBAccess, "summary",
                        lambda self, *a, **k: (during.append(setting(owner)), real(self, *a, **k))[1])
    served = app(owner, workers=4, processes=False)
    with live_server(served) as url:
        assert explain(url, owner.token).status_code == 200
        assert setting(owner) == 1
        for session in served.state.service.pool.sessions():
            session._summaries.clear()
        during.clear()
        assert explain(url, owner.token).status_code == 200
        assert during == [4] and setting(owner) == 1


def setting(owner) -> int:
    return int(owner.con.execute("SELECT current_setting('threads')").fetchall()[0][0])


def test_duckdb_threads_below_one_are_refused(owner):
    from pcor_sql.errors import UserError

    for bad in (0, "all", 2.0):
        with pytest.raises(UserError, match="duckdb_threads must be a whole number ≥ 1"):
            app(owner, duckdb_threads=bad)
