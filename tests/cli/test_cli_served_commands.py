"""Owner commands while `pcor-sql serve` holds the file (DESIGN.md §9 "Forwarded owner commands"): carried
out by the service with the same output and exit codes as without one; none fails "locked".
The service runs as a child process (`benchmarks.service_process`), the commands through the
CLI (CliRunner) in this process, as an owner's shell would."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time

import duckdb
import httpx
import pytest

import pcor_sql
from benchmarks.service_process import start
from pcor_sql.service import runtime_file
from tests.cli.cli_helpers import invoke

pytestmark = pytest.mark.slow


def make_db(path) -> str:
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b'); CREATE TABLE t AS SELECT i AS id, (['a', 'b'])[i % 2 + 1]::dept"
                " AS dept, CASE WHEN i = 7 THEN 900.0 ELSE i % 5 END AS pay FROM range(60) t(i)")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("t", "t", key="id", metric="pay", by="dept", limit=10.0, releasable=[7])
    token = owner.add_analyst("ana", quota=2.0)
    con.close()
    return token


#: The owner's commands are carried out by the service's owner listener, whatever the workers:
#: one worker searching in its thread starts in seconds, where four search processes took up to
#: two minutes on a loaded 2-core machine (their searches are tested in tests/service).
LIGHT = ("--workers", "1", "--searches", "threads")


def serve(path, *args: str):
    served = start(path, args=[*LIGHT, *args])
    deadline = time.monotonic() + 30
    while runtime_file.live(path) is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the runtime file is written once the listeners are up
    return served


def ok(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    assert "locked" not in result.stderr
    return result.stdout


READS = (("analyst", "list", "--format", "json"), ("budget", "status", "--format", "json"),
         ("dataset", "list", "--format", "json"), ("dataset", "show", "t", "--format", "json"),
         ("budget", "verify"), ("budget", "history", "--format", "json"))


def test_owner_commands_run_through_the_service_with_the_same_output(tmp_path):
    path = tmp_path / "pay.duckdb"
    make_db(path)
    token_file = tmp_path / "owner.token"
    served = serve(path, "--owner-token-file", str(token_file))
    try:
        found = runtime_file.live(path)
        assert found is not None and found["pid"] == served.process.pid
        mode = stat.S_IMODE(os.stat(runtime_file.path_for(path)).st_mode)
        assert mode == 0o600 and stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert token_file.read_text().strip() == found["token"]
        new = ok("analyst", "add", "bo", "--quota", "1", "--db", str(path)).splitlines()[-1]
        rotated = ok("analyst", "rotate", "bo", "--db", str(path)).splitlines()[-1]
        assert rotated != new and rotated.startswith("pcor_")
        body = {"dataset": "t", "keys": [7], "epsilon": 0.1, "verifier": "grubbs"}
        headers = {"Content-Type": "application/json"}
        assert httpx.post(served.url + "/v1/explain", content=json.dumps(body),
                          headers={**headers, "Authorization": f"Bearer {new}"}, timeout=60).status_code == 401
        assert httpx.post(served.url + "/v1/explain", content=json.dumps(body),
                          headers={**headers, "Authorization": f"Bearer {rotated}"}, timeout=60).status_code == 200
        ok("analyst", "revoke", "bo", "--db", str(path))
        assert httpx.post(served.url + "/v1/explain", content=json.dumps(body),
                          headers={**headers, "Authorization": f"Bearer {rotated}"}, timeout=60).status_code == 401
        ok("analyst", "quota", "ana", "3", "--db", str(path))
        ok("budget", "set-limit", "t", "20", "--db", str(path))
        ok("dataset", "add", "t2", "t", "--key", "id", "--metric", "pay", "--by", "dept", "--db", str(path))
        ok("dataset", "remove", "t2", "--db", str(path))
        refused = invoke("analyst", "revoke", "nobody", "--db", str(path))  # an error: the same code and line
        assert refused.exit_code == 2 and refused.stderr.startswith("error: there is no analyst named 'nobody'")
        through = {args: ok(*args, "--db", str(path)) for args in READS}
        log = served.log()
    finally:
        served.stop()
    assert "POST /v1/owner/command 200" in log and found["token"] not in log
    assert not runtime_file.path_for(path).exists()  # removed on a clean stop
    direct = {args: ok(*args, "--db", str(path)) for args in READS}
    assert through == direct


def test_a_killed_services_runtime_file_is_ignored(tmp_path):
    path = tmp_path / "pay.duckdb"
    make_db(path)
    served = serve(path)
    served.kill()
    assert runtime_file.path_for(path).exists()  # left behind by kill -9
    assert json.loads(ok("analyst", "list", "--format", "json", "--db", str(path)).splitlines()[0])["name"] == "ana"
    assert not runtime_file.path_for(path).exists()  # stale: removed


def test_commands_racing_a_stop_each_run_exactly_once(tmp_path):
    path = tmp_path / "pay.duckdb"
    make_db(path)
    served = serve(path)
    results: dict[str, tuple[int, str]] = {}
    lock = threading.Lock()

    def add(i: int) -> None:
        # Separate processes, as owners' shells would be (CliRunner swaps sys.stdout: one at a time).
        result = subprocess.run([sys.executable, "-m", "pcor_sql", "analyst", "add", f"r{i}", "--db", str(path)],
                                capture_output=True, text=True, timeout=300)
        with lock:
            results[f"r{i}"] = (result.returncode, result.stderr)

    # Three owners' shells, four commands each, one after another; SIGTERM once some ran through
    # the service. (Direct opens queue on DuckDB's file lock, as without a service: a dozen at once
    # would be a test of that lock's 10 s wait on a loaded machine, not of the race.)
    threads = [threading.Thread(target=lambda k=k: [add(4 * k + j) for j in range(4)]) for k in range(3)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while len(results) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        served.process.terminate()  # SIGTERM in the middle of the commands
        for t in threads:
            t.join(timeout=300)
    finally:
        served.stop()
    failed = {name: err for name, (code, err) in results.items() if code != 0}
    assert not failed and len(results) == 12, failed
    con = duckdb.connect(str(path))
    try:
        names = [n for (n,) in con.execute("SELECT name FROM pcor.analysts").fetchall()]
    finally:
        con.close()
    assert sorted(n for n in names if n.startswith("r")) == sorted(f"r{i}" for i in range(12))


def test_a_command_while_the_service_starts_waits_for_it(tmp_path):
    """The runtime file is written as soon as the sockets listen, before the database opens: a
    command sent then waits in the socket's queue and runs once the service is up."""
    path = tmp_path / "pay.duckdb"
    make_db(path)
    from benchmarks.service_process import free_port

    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([sys.executable, "-m", "pcor_sql", "serve", "--db", str(path), "--port", str(port),
                                "--owner-port", str(free_port()), *LIGHT], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not runtime_file.path_for(path).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        listed = ok("analyst", "list", "--format", "json", "--db", str(path))
        assert json.loads(listed.splitlines()[0])["name"] == "ana"
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()
    assert "POST /v1/owner/command 200" in (tmp_path / "serve.log").read_text()


def test_a_kept_alive_connection_is_answered_at_once(tmp_path):
    """A response is written in two parts (headers, body): unless the served sockets turn Nagle's
    algorithm off, the body waits for the client's delayed ACK of the headers — 40 ms or more on
    every request of a kept-alive connection (Linux), which is how clients talk to a service."""
    import http.client
    import statistics
    from urllib.parse import urlsplit

    path = tmp_path / "pay.duckdb"
    make_db(path)
    served = serve(path)
    try:
        address = urlsplit(served.url)
        conn = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        took = []
        for _ in range(9):
            started = time.perf_counter()
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert response.status == 200 and json.loads(response.read()) == {"status": "ok"}
            took.append(time.perf_counter() - started)
        conn.close()
    finally:
        served.stop()
    assert statistics.median(took[1:]) < 0.025, took
