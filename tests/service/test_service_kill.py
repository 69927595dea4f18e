"""Kill -9 the service in the middle of a burst, then restart it (DESIGN.md §8 "Concurrency": a
service killed mid-request shows nothing uncharged; on restart the history shows the request as
interrupted).

`pcor-sql serve` runs as a child process on a DuckDB file; six analysts fire slow requests
(LOF, twenty-four keys each) at once; once some answers have come back and the history shows requests
still running, the process gets SIGKILL. A new `pcor-sql serve` on the same file then shows:
- every key answered with a 200 has an answered, charged history row (nothing shown uncharged);
- the requests in flight are 'interrupted' (charged), none is left 'running', and no more
  are interrupted than the clients lost;
- each analyst's spent equals the sum of their history;
and once it has stopped, `pcor-sql budget verify --db FILE` passes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter

import duckdb
import pytest

import pcor_sql
from benchmarks.service_process import start
from benchmarks.shared_ledger import make_data, register
from pcor_sql.errors import PcorError

pytestmark = pytest.mark.slow

ROWS = 200_000
ANALYSTS = 6
REQUESTS = 4
KEYS = list(range(24))  # planted outliers, all releasable
KEYS_PER_REQUEST = 24  # a request works long enough to be caught running (a compiled LOF check is fast)
OPTIONS = {"epsilon": 0.05, "verifier": "lof(k=10)"}
WAIT_S = 120.0


def make_database(path, ledger: str | None = None, rows: int = ROWS, analysts: int = ANALYSTS) -> dict[str, str]:
    """The staff table of `rows` rows with its planted outliers, registered (in `ledger`, else
    the file's own), and `analysts` analysts' tokens (the shared-ledger benchmark's data)."""
    make_data(path, rows, outliers=len(KEYS))
    return register(path, ledger, analysts=analysts, limit=1000.0, quota=100.0, releasable=KEYS)


def burst(url: str, tokens: dict[str, str], answered: dict[str, list], lost: Counter, stop: threading.Event) -> list:
    """Each analyst's requests in a thread; 200s (their keys) and lost requests recorded."""
    def analyst(index: int, name: str, token: str) -> None:
        with pcor_sql.connect(url, token, timeout=WAIT_S) as handle:
            for j in range(REQUESTS):
                if stop.is_set():
                    return
                first = (index * REQUESTS + j) * KEYS_PER_REQUEST % len(KEYS)
                keys = [KEYS[first + n] for n in range(KEYS_PER_REQUEST)]
                try:
                    results = handle.explain_outliers("staff", keys, **OPTIONS)
                except PcorError:
                    lost[name] += 1  # the connection died with the process
                    return
                answered[name].extend(r.key for r in results)

    threads = [threading.Thread(target=analyst, args=(i, n, t), daemon=True) for i, (n, t) in enumerate(tokens.items())]
    for t in threads:
        t.start()
    return threads


def histories(url: str, tokens: dict[str, str]) -> dict[str, list[dict]]:
    out = {}
    for name, token in tokens.items():
        with pcor_sql.connect(url, token, timeout=60) as handle:
            out[name] = handle.history()
    return out


def test_kill_9_mid_burst_shows_nothing_uncharged_and_marks_the_running_interrupted(tmp_path):
    db = tmp_path / "staff.duckdb"
    tokens = make_database(db)
    answered: dict[str, list] = {name: [] for name in tokens}
    lost: Counter = Counter()
    stop = threading.Event()
    service = start(db, args=["--workers", "4"])
    try:
        threads = burst(service.url, tokens, answered, lost, stop)
        deadline = time.monotonic() + WAIT_S
        running: set[str] = set()
        while time.monotonic() < deadline and not running:
            if any(answered.values()):
                # One analyst's history at a time, killed at the first running row seen: looking
                # at all six first let the requests in flight finish before the kill.
                for name, token in tokens.items():
                    with pcor_sql.connect(service.url, token, timeout=60) as handle:
                        running = {h["release_id"] for h in handle.history() if h["outcome"] == "running"}
                    if running:
                        service.kill()
                        break
            time.sleep(0.02)
        assert running and any(answered.values()), "the burst never had answers and running requests at once"
    finally:
        stop.set()
        service.stop()
    for t in threads:
        t.join(timeout=WAIT_S)
    shown = {name: list(keys) for name, keys in answered.items()}  # what clients saw before the kill

    # The restart only reads the history and the quotas: one worker searching in its thread starts
    # in a few seconds where four search processes took ~30 s (what the kill left is marked when the
    # ledger is opened, whatever the workers).
    restarted = start(db, args=["--workers", "1", "--searches", "threads"])
    try:
        after = histories(restarted.url, tokens)
        usage = {}
        for name, token in tokens.items():
            with pcor_sql.connect(restarted.url, token) as handle:
                usage[name] = {u["notion"]: u["spent"] for u in handle.me()["usage"] if u["dataset"] is None}
    finally:
        restarted.stop()

    outcomes = Counter(h["outcome"] for rows in after.values() for h in rows)
    assert "running" not in outcomes, outcomes
    by_id = {h["release_id"]: h["outcome"] for rows in after.values() for h in rows}
    # Rows seen running before the kill ended one way or the other (some finished in the moment
    # between that look and the kill); the requests in flight at the kill are interrupted, and
    # each interrupted request is one a client lost (never one it was answered).
    assert {by_id[r] for r in running} <= {"interrupted", "answered", "failed"}
    assert outcomes["interrupted"] >= 1, outcomes
    assert outcomes["interrupted"] <= KEYS_PER_REQUEST * sum(lost.values()), (outcomes, lost)
    for name, rows in after.items():
        charged = Counter(h["key"] for h in rows if h["outcome"] == "answered")
        assert not Counter(f"key = {k!r}" for k in shown[name]) - charged, (name, shown[name], rows)
        assert usage[name]["ocdp"] == pytest.approx(sum(h["epsilon"] for h in rows), abs=1e-9)
        assert all(h["epsilon"] == pytest.approx(OPTIONS["epsilon"]) for h in rows)
    assert sum(lost.values()) >= 1  # some requests were cut off by the kill

    verify = subprocess.run([sys.executable, "-m", "pcor_sql", "budget", "verify", "--db", str(db)],
                            capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    con = duckdb.connect(str(db))
    try:
        assert pcor_sql.Owner(con, warn=lambda message: None).verify_ledger() == ()
    finally:
        con.close()
