"""A batch's searches in forked worker processes (DESIGN.md §10 "Seeded batches"): seeded outputs equal
for any number of workers, results in the records' order, a worker killed with kill -9 loses
only its record (the ledger verifies, the pool forks a replacement), the request's work meter
and stop reach the workers, Ctrl-C ends them, bad counts are one line."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.core import work
from pcor_sql.core.randomness import record_source
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.registry import PythonVerifier
from pcor_sql.engine import search_pool
from pcor_sql.engine.record_search import OutlierRun
from pcor_sql.errors import PrivacyWarning, UserError
from pcor_sql.results import NotReleased

#: Six planted outliers of the bundled salaries and record 1, an outlier in no context searched.
BATCH = "SELECT salary FROM salaries WHERE id IN (42, 171, 1777, 6617, 7441, 1)"


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    return con


def batch(con, workers, **options):
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None, allow_seeded=True)
    results = pcor_sql.explain_outliers(None, BATCH, session=session, epsilon=0.2, workers=workers, **options)
    return session, results


def outputs(results):
    return [(r.record["id"], r.predicate, r.em_calls, r.owner.as_dict()) if r.released else (r.record["id"], r.reason)
            for r in results]


def test_a_seeded_batch_gives_the_same_outputs_for_one_two_and_three_workers(con):
    runs = {n: outputs(batch(con, n, seed=7, owner_view=True)[1]) for n in (1, 2, 3)}
    assert runs[1] == runs[2] == runs[3]
    assert [row[0] for row in runs[1]] == [42, 171, 1777, 6617, 7441, 1]  # the IN list's order
    assert runs[1][-1][1] == "no-valid-context" and all(len(row) == 4 for row in runs[1][:-1])  # record 1


def test_each_record_draws_from_its_own_stream_and_a_lone_record_from_the_seed_itself():
    assert record_source(7, 0).random() == record_source(7, 0).random()
    draws = [record_source(7, i).random() for i in range(4)]
    assert len(set(draws)) == 4 and draws[1] == record_source(7, 1).random()
    import numpy as np

    assert draws[0] == np.random.default_rng(7).random()  # one record draws as before batches


class _Fake:
    """An `OutlierRun` stand-in for the pool itself: its release says which process ran it, and
    `act(i)` may spend work, fail, sleep or kill the worker."""

    def __init__(self, act=None):
        self.verifier = Lof()
        self.act = act or (lambda i: None)

    def release(self, i, source):
        self.act(i)
        return (i, os.getpid(), float(source.random()))


def test_the_pool_answers_in_the_records_order_from_other_processes_with_each_records_coins():
    done = []
    out = search_pool.release_all(_Fake(), 5, list(range(1, 9)), 3, lambda: done.append(1))
    assert sorted(out) == list(range(1, 9)) and len(done) == 8
    assert {pid for _, pid, _ in out.values()} - {os.getpid()} == {pid for _, pid, _ in out.values()}
    assert [out[i][2] for i in range(1, 9)] == [record_source(5, i).random() for i in range(1, 9)]
    assert multiprocessing.active_children() == []


def _suicide_at(target):
    def act(i):
        if i == target:
            os.kill(os.getpid(), signal.SIGKILL)
    return act


def test_a_worker_killed_loses_its_record_alone_and_is_replaced():
    out = search_pool.release_all(_Fake(_suicide_at(3)), None, list(range(1, 8)), 2, lambda: None)
    assert isinstance(out[3], search_pool.WorkerLost)
    assert all(isinstance(out[i], tuple) for i in range(1, 8) if i != 3)
    assert len({out[i][1] for i in range(4, 8)} | {out[i][1] for i in (1, 2)}) >= 2
    assert multiprocessing.active_children() == []


def test_the_request_meter_counts_the_workers_work_in_order_and_its_cap_stops_the_request():
    spend = lambda i: work.spend(10)  # noqa: E731
    meter = work.WorkMeter(cap=1000)
    with work.metered(meter):
        search_pool.release_all(_Fake(spend), None, list(range(1, 6)), 2, lambda: None)
    assert meter.used == 50
    with work.metered(work.WorkMeter(cap=25)), pytest.raises(work.WorkCapReached):
        search_pool.release_all(_Fake(spend), None, list(range(1, 6)), 2, lambda: None)
    assert multiprocessing.active_children() == []


def test_a_stop_and_ctrl_c_end_the_workers_in_the_middle_of_their_searches():
    import threading

    stop = threading.Event()
    slow = lambda i: time.sleep(0.05 if i == 1 else 30)  # noqa: E731
    started = time.monotonic()
    with work.metered(work.WorkMeter(stop=stop)), pytest.raises(work.Stopping):
        search_pool.release_all(_Fake(slow), None, list(range(1, 5)), 2, stop.set)
    assert time.monotonic() - started < 15 and multiprocessing.active_children() == []

    def interrupt():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        search_pool.release_all(_Fake(slow), None, list(range(1, 5)), 2, interrupt)
    assert time.monotonic() - started < 30 and multiprocessing.active_children() == []


def test_a_real_batch_with_a_worker_killed_reports_that_record_and_the_ledger_verifies(tmp_path, monkeypatch):
    db = duckdb.connect(str(tmp_path / "data.duckdb"))
    pcor_sql.load_datasets(db)
    owner = pcor_sql.Owner(db)  # the ledger lives in the data file: the workers must leave it alone
    parent, real = os.getpid(), OutlierRun.release

    def release(self, i, source, **kwargs):
        if i == 3 and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, i, source, **kwargs)

    monkeypatch.setattr(OutlierRun, "release", release)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        results = owner.explain_outliers(BATCH, epsilon=0.2, workers=2)
    lost = results[2]  # the fourth record run (1777), third in the IN list's order
    assert isinstance(lost, NotReleased) and (lost.reason, lost.charged) == ("worker-lost", False)
    assert [r.released for r in results] == [True, True, False, True, True, False]
    assert owner.verify_ledger() == ()
    assert owner.spent("salaries") == pytest.approx(0.2 * 4)  # the answered records alone stay charged
    outcomes = sorted((r.outcome, r.reason) for r in owner.ledger.history())
    assert outcomes.count(("interrupted", "worker-lost")) == 1  # DESIGN.md §10: an interrupted record


def test_searches_that_call_back_into_the_callers_python_stay_in_the_owning_process(con):
    run = OutlierRun(con, None, None, PythonVerifier("mine", lambda pop: True), (), None)
    assert not search_pool.can_fork(run)
    assert search_pool.can_fork(OutlierRun(con, None, None, Lof(), (), None))


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2", 10**6])
def test_a_bad_worker_count_is_one_line_before_any_charge(workers):
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None)
    with pytest.raises(UserError, match="workers=... must be a whole number from 1 to 1,024"):
        pcor_sql.explain_outliers(None, BATCH, session=session, epsilon=0.2, workers=workers)
    with pytest.raises(UserError, match="must be a whole number"):
        pcor_sql.identify_anomalies(None, "SELECT salary FROM salaries WHERE id IN (42, 43)", session=session,
                                    beta=5, radius=1000, epsilon=0.5, workers=workers)
    assert session.ledger().history() == ()


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_workers_die_with_their_owner_when_it_is_killed():
    owner = os.fork()
    if owner == 0:  # the owner: a batch whose searches take 30 s
        try:
            search_pool.release_all(_Fake(lambda i: time.sleep(30)), None, [1, 2], 2, lambda: None)
        finally:
            os._exit(0)
    workers = []
    for _ in range(200):
        time.sleep(0.05)
        with open(f"/proc/{owner}/task/{owner}/children") as fh:
            workers = [int(p) for p in fh.read().split()]
        if len(workers) == 2:
            break
    assert len(workers) == 2
    os.kill(owner, signal.SIGKILL)
    os.waitpid(owner, 0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_state(p) not in ("Z", "gone") for p in workers):
        time.sleep(0.05)
    assert all(_state(p) in ("Z", "gone") for p in workers)


def test_a_worker_reads_its_messages_until_told_to_stop_or_its_owners_end_is_gone():
    ours, theirs = multiprocessing.Pipe()
    for message in (3, ("search", 1), None, 4):
        ours.send(message)
    assert list(search_pool.received(theirs)) == [3, ("search", 1)]  # None: stop, whatever follows
    ours.send(5)
    ours.close()
    assert list(search_pool.received(theirs)) == [4, 5]  # then the owner's end is gone
