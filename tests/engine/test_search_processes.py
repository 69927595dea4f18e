"""Long-lived search processes over shared summaries (DESIGN.md §10 "Reads in DuckDB, searches in workers"): a summary
mapped from its file equals the one built; a seeded release is the same in the child as in the
thread; a child killed with kill -9 loses its record and is replaced; a stop ends the search;
the work cap reaches the child; verifiers that call back stay in the thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import duckdb
import numpy as np
import pytest

import pcor_sql
from pcor_sql.core import work
from pcor_sql.engine import search_processes
from pcor_sql.engine.search_pool import WorkerLost
from pcor_sql.engine.search_processes import SearchProcess
from pcor_sql.engine.shared_summary import SharedSummaries, attach

BATCH = "SELECT salary FROM salaries WHERE id IN (42, 171, 1777, 1)"


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    return con


@pytest.fixture()
def shared():
    shared = SharedSummaries()
    yield shared
    shared.close()


def same_summary(a, b) -> bool:
    """Equal moments and runs: the file holds copies of the arrays (no arithmetic)."""
    names = ("coords", "count", "s1", "s2", "vmin", "vmax")
    if not all(np.array_equal(getattr(a, n), getattr(b, n)) for n in names) or (a._runs is None) != (b._runs is None):
        return False
    return a._runs is None or (np.array_equal(a._runs.values, b._runs.values)
                               and np.array_equal(a._runs.starts, b._runs.starts))


def session_of(con, searches=None):
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None, allow_seeded=True)
    session.searches = searches
    return session


def outputs(results):
    return [(r.record["id"], r.predicate, r.em_calls) if r.released else (r.record["id"], r.reason) for r in results]


@pytest.mark.parametrize("verifier", ["lof", "grubbs"])
def test_a_summary_mapped_from_its_file_equals_the_one_built(con, shared, verifier):
    session = session_of(con)
    request = pcor_sql.outlier_request(con, BATCH, verifier=verifier)
    summary = session.prepare(request).summary
    mapped = attach(shared.share(summary))
    assert same_summary(summary, mapped)
    assert mapped.coords.flags.writeable and mapped._con is None
    assert shared.share(summary) is shared.share(summary)  # written once


@pytest.mark.parametrize("verifier", ["lof", "grubbs", "histogram", "zscore"])
def test_a_seeded_batch_releases_the_same_in_the_search_process_as_in_the_thread(con, shared, verifier):
    here = outputs(pcor_sql.explain_outliers(None, BATCH, session=session_of(con), epsilon=0.2, seed=11,
                                             verifier=verifier))
    child = SearchProcess(shared)
    try:
        there = outputs(pcor_sql.explain_outliers(None, BATCH, session=session_of(con, child), epsilon=0.2, seed=11,
                                                  verifier=verifier))
        assert child.pid is not None and child.pid != os.getpid()
    finally:
        child.close()
    assert there == here
    assert any(len(row) == 3 for row in here)


def test_a_python_verifier_runs_in_the_thread_not_the_child(shared):
    # A table of 600 rows: whether the child may take the searches (`search_processes.accepts`)
    # is asked of the request's verifier, never of the data; on the 51,000 salaries a Python
    # verifier's search (a sorted population per context) takes ~10 s a record.
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, (i % 3)::VARCHAR AS a, (i % 2)::VARCHAR AS b, "
                "CASE WHEN i = 0 THEN 1000.0 ELSE (i % 97)::DOUBLE / 7 + 1 END AS v FROM range(600) t(i)")
    session = session_of(con, SearchProcess(shared))
    pids = set()

    def far(values, v):
        pids.add(os.getpid())
        return abs(v - float(np.median(values))) > 3 * float(np.std(values))

    session.registry.register_python("far", far)
    [result] = pcor_sql.explain_outliers(None, "SELECT v FROM t WHERE id = 0", session=session, by=["a", "b"],
                                         epsilon=0.2, seed=3, verifier="far")
    assert result.released  # the search ran, asking the Python verifier
    assert pids == {os.getpid()} and session.searches.pid is None  # never forked


def test_a_child_that_died_loses_its_record_and_is_replaced(con, shared):
    session = session_of(con)
    prepared = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="lof", epsilon=0.2, seed=5))
    child = SearchProcess(shared)
    child.start()
    first = child.pid
    os.kill(first, signal.SIGKILL)
    try:
        out = child.release_all(prepared, 5, [0, 1], lambda: None)
        assert isinstance(out[0], WorkerLost)
        assert child.pid != first and child.started == 2
        assert not isinstance(out[1], Exception)  # the replacement answered the next record
    finally:
        child.close()


def test_a_child_killed_mid_search_loses_its_record(con, shared):
    session = session_of(con)
    prepared = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="lof", epsilon=0.2, seed=5,
                                                        search="direct"))
    child = SearchProcess(shared)
    child.warm([prepared.summary])  # up, with the summary mapped: the kill lands during the search
    first = child.pid
    killer = threading.Timer(0.2, os.kill, (first, signal.SIGKILL))
    killer.start()
    try:
        started = time.perf_counter()
        out = child.release_all(prepared, 5, [1], lambda: None)
        assert isinstance(out[1], WorkerLost) and time.perf_counter() - started < 5
        assert child.pid != first
    finally:
        killer.cancel()
        child.close()


def test_a_stop_ends_the_search_and_the_child_is_replaced(con, shared):
    session = session_of(con)
    prepared = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="lof", epsilon=0.2, seed=5,
                                                        search="direct"))
    child = SearchProcess(shared)
    stop = threading.Event()
    stop.set()
    try:
        with work.metered(work.WorkMeter(None, stop)):
            with pytest.raises(work.Stopping):
                child.release_all(prepared, 5, [0], lambda: None)
        assert child.started == 2  # the stopped child was killed and a fresh one started
    finally:
        child.close()


def test_the_work_cap_reaches_the_child(con, shared):
    session = session_of(con)
    prepared = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="grubbs", epsilon=0.2, seed=5))
    child = SearchProcess(shared)
    try:
        meter = work.WorkMeter(3)
        with work.metered(meter):
            with pytest.raises(work.WorkCapReached):
                child.release_all(prepared, 5, [1, 2], lambda: None)
        assert meter.used > 3
    finally:
        child.close()


def test_spark_summaries_and_user_verifiers_are_not_accepted(con):
    session = session_of(con)
    prepared = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="lof"))
    assert search_processes.accepts(prepared)
    prepared.summary.windows = object()
    try:
        assert not search_processes.accepts(prepared)
    finally:
        prepared.summary.windows = None


def test_a_child_ends_soon_after_its_owner_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from pcor_sql.engine.search_processes import SearchProcess\n"
        "from pcor_sql.engine.shared_summary import SharedSummaries\n"
        "p = SearchProcess(SharedSummaries()); p.warm([])\n"
        "print(p.pid, flush=True); time.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(owner.stdout.readline())
        assert _alive(child)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read()
    except OSError:
        return False


def test_the_summary_files_are_private_and_an_ended_owners_are_removed(con, tmp_path):
    import stat

    from pcor_sql.engine import shared_summary

    session = session_of(con)
    summary = session.prepare(pcor_sql.outlier_request(con, BATCH, verifier="lof")).summary
    shared = SharedSummaries(str(tmp_path))
    try:
        path = shared.share(summary).path
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    finally:
        shared.close()
    assert not os.path.exists(path)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"{shared_summary._PREFIX}{int(ended.stdout)}-abc"
    stale.mkdir()
    (stale / "summary-x").write_bytes(b"values")
    live = tmp_path / f"{shared_summary._PREFIX}{os.getpid()}-def"
    live.mkdir()
    SharedSummaries(str(tmp_path)).close()
    assert not stale.exists() and live.exists()  # the ended owner's folder went; a live owner's stays
