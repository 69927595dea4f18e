"""Two services on one PostgreSQL ledger, one killed -9 mid-burst (DESIGN.md §11 "Dead hosts",
"Faults"): the dead service's reservations are marked interrupted once its lease lapses, by the
service that goes on (no pid or host name decides it), nothing shown was uncharged, and `budget
verify` passes — the history's chain included.

Two `pcor-sql serve --db COPY --ledger postgresql://…` processes, each on its own copy of the
data file (the copy carries the file's marker naming the server ledger), with a lease of
LEASE_S seconds; analysts fire slow requests at both at once. Once the ledger shows the first
service's requests running (read straight from the server, which marks nothing), it gets
SIGKILL. The second keeps serving; its renewals look at the lapsed leases. The rows of the dead
one stay 'running' until its lease lapses, then become 'interrupted' ('lease lapsed').
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter

import pytest

import pcor_sql
from benchmarks.service_process import start
from pcor_sql.errors import PcorError

from test_service_kill import KEYS, make_database

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow

ROWS = 60_000
ANALYSTS = 4
KEYS_PER_REQUEST = 12
OPTIONS = {"epsilon": 0.05, "verifier": "lof(k=10)"}
LEASE_S = 3.0
WAIT_S = 120.0


def rows(url: str, query: str, params=()) -> list[tuple]:
    """The ledger's rows read straight from the server (no pcor-sql code: nothing is marked)."""
    with psycopg.connect(url, autocommit=True) as con:
        return [tuple(r) for r in con.execute(query, params).fetchall()]


def analyst_loop(url: str, name: str, token: str, index: int, answered: dict, lost: Counter,
                 stop: threading.Event) -> None:
    with pcor_sql.connect(url, token, timeout=WAIT_S) as handle:
        j = 0
        while not stop.is_set():
            first = (index * 7 + j * KEYS_PER_REQUEST) % len(KEYS)
            keys = [KEYS[(first + n) % len(KEYS)] for n in range(KEYS_PER_REQUEST)]
            j += 1
            try:
                results = handle.explain_outliers("staff", keys, **OPTIONS)
            except PcorError:
                lost[name] += 1  # the connection died with the process, or the refusal after it
                return
            answered[name].extend(r.key for r in results)


def test_kill_9_of_one_of_two_services_interrupts_its_rows_after_its_lease(postgres_server, tmp_path):
    url = postgres_server.fresh_url()
    first_db, second_db = tmp_path / "staff.duckdb", tmp_path / "copy.duckdb"
    tokens = make_database(first_db, url, rows=ROWS, analysts=ANALYSTS)
    shutil.copyfile(first_db, second_db)
    env = {"PCOR_SQL_LEASE_SECONDS": str(LEASE_S)}
    args = ["--ledger", url, "--workers", "2"]
    services: list = [None, None]
    starters = [threading.Thread(target=lambda i=i, db=db: services.__setitem__(i, start(db, args=args, env=env)))
                for i, db in enumerate((first_db, second_db))]
    for t in starters:
        t.start()
    for t in starters:
        t.join(timeout=300)
    dead, alive = services
    assert dead is not None and alive is not None, "a service did not start"
    answered: dict[str, list] = {name: [] for name in tokens}
    lost: Counter = Counter()
    stop_dead, stop_alive = threading.Event(), threading.Event()
    threads = []
    try:
        for i, (name, token) in enumerate(tokens.items()):
            target, stop = (dead, stop_dead) if i % 2 == 0 else (alive, stop_alive)
            threads.append(threading.Thread(target=analyst_loop, daemon=True,
                                            args=(target.url, name, token, i, answered, lost, stop)))
        for t in threads:
            t.start()
        pid = dead.process.pid
        deadline = time.monotonic() + WAIT_S
        running: list[tuple] = []
        while time.monotonic() < deadline and not running:
            if any(answered.values()):
                running = rows(url, "SELECT release_id FROM pcor.history WHERE outcome = 'running' AND pid = %s", [pid])
            if not running:
                time.sleep(0.02)
        assert running, "the first service never had a request running"
        dead.kill()
        killed = time.monotonic()
        stop_dead.set()
        # The second service goes on; its lease's renewals look at the lapsed leases.
        left: list[tuple] = running
        while time.monotonic() < killed + 60 and left:
            left = rows(url, "SELECT release_id FROM pcor.history WHERE outcome = 'running' AND pid = %s", [pid])
            time.sleep(0.1)
        marked = time.monotonic() - killed
        print(f"the dead service's {len(running)} running row(s) marked {marked:.1f} s after its kill")
        assert not left, "the dead service's rows were not marked within 60 s of its kill"
    finally:
        stop_dead.set()
        stop_alive.set()
        for service in services:
            if service is not None:
                service.kill() if service is dead else service.stop()
    for t in threads:
        t.join(timeout=WAIT_S)

    ended = dict(rows(url, "SELECT release_id, outcome || ':' || coalesce(reason, '') FROM pcor.history"
                           " WHERE pid = %s", [pid]))
    assert {ended[rid] for (rid,) in running} <= {"interrupted:lease lapsed", "answered:"}, ended
    assert "interrupted:lease lapsed" in set(ended.values())
    assert marked >= LEASE_S / 3, marked  # not before its lease could lapse (renewed every LEASE_S / 3)
    assert rows(url, "SELECT count(*) FROM pcor.history WHERE outcome = 'running'") == [(0,)]
    # Nothing shown was uncharged: every key a client saw has an answered, charged row.
    history = rows(url, "SELECT analyst, record_key, outcome FROM pcor.history")
    for name, keys in answered.items():
        charged = Counter(key for who, key, outcome in history if who == name and outcome == "answered")
        assert not Counter(f"key = {k!r}" for k in keys) - charged, (name, keys)
    assert any(answered[name] for i, name in enumerate(tokens) if i % 2 == 1)  # the second went on
    from typer.testing import CliRunner

    from pcor_sql.cli.main import app

    verified = CliRunner().invoke(app, ["budget", "verify", "--ledger", url])
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    assert "every history entry matches its hash chain" in verified.stdout
