"""SIGTERM stops `pcor-sql serve` within seconds whatever is running (DESIGN.md §8 "Concurrency": it used to
wait forever on maximal requests), and the requests it interrupted are recorded as interrupted."""

from __future__ import annotations

import json
import threading
import time

import duckdb
import httpx
import pytest

import pcor_sql
from benchmarks.service_process import start

pytestmark = pytest.mark.slow
HEAVY = {"dataset": "staff", "epsilon": 0.01, "verifier": "grubbs", "search": "bfs", "samples": 1_000_000,
         "descents": 100_000}


def test_sigterm_stops_within_seconds_and_records_the_running_as_interrupted(tmp_path):
    path = tmp_path / "staff.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c', 'd', 'e', 'f')")
    # A 40-value attribute: a maximal search over 2^46 contexts runs for minutes, so it is surely
    # running when the signal comes (over 6 values it ended within a second).
    con.execute("CREATE TYPE grp AS ENUM (" + ", ".join(f"'g{j}'" for j in range(40)) + ")")
    con.execute("CREATE TABLE staff AS SELECT i AS id, (['a', 'b', 'c', 'd', 'e', 'f'])[i % 6 + 1]::dept AS dept,"
                " ('g' || (i % 40))::grp AS grp, CASE WHEN i = 7 THEN 9000.0 ELSE 100.0 + i % 13 END AS pay"
                " FROM range(3000) t(i)")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("staff", "staff", key="id", metric="pay", by=["dept", "grp"], limit=100.0, releasable=[7])
    token = owner.add_analyst("alice", quota=50.0)
    con.close()

    served = start(path, args=["--workers", "2", "--max-work", "1000000000"])
    statuses: list[int] = []

    def ask() -> None:
        try:
            r = httpx.post(served.url + "/v1/explain", content=json.dumps({**HEAVY, "keys": [7]}), timeout=120,
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
            statuses.append(r.status_code)
        except httpx.HTTPError:
            statuses.append(0)

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while "running" not in _outcomes(served, token) and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the history: the requests are caught running, not guessed at
        stopped = time.monotonic()
        served.stop(timeout=30)
        took = time.monotonic() - stopped
    finally:
        served.kill()
    for t in threads:
        t.join(timeout=30)
    assert took < 10.0, (took, served.log())
    assert served.process.returncode is not None
    con = duckdb.connect(str(path))
    try:
        owner = pcor_sql.Owner(con, warn=lambda message: None)
        outcomes = [h.outcome for h in owner.ledger.history() if h.analyst == "alice"]
    finally:
        con.close()
    assert outcomes and set(outcomes) == {"interrupted"}, (outcomes, statuses, served.log())
    assert all(s in (503, 0) for s in statuses), statuses


def _outcomes(served, token: str) -> set[str]:
    try:
        r = httpx.get(served.url + "/v1/history", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        return {row["outcome"] for row in r.json()["history"]}
    except (httpx.HTTPError, ValueError, KeyError):
        return set()
