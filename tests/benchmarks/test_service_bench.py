"""`python -m benchmarks service` at tiny sizes: it serves, loads, checks and writes its
section; a broken invariant fails its verdicts."""

from __future__ import annotations

import json

import pytest

from benchmarks.service_load import LoadConfig, percentile, request_plan, verdicts
from tests.benchmarks.app_helpers import assert_error, invoke as run


@pytest.mark.slow  # a real service and its clients: 13-26 s on 2 cores at load 8, minutes under more
def test_service_smoke(tmp_path):
    bench_md = tmp_path / "BENCHMARKS.md"
    bench_md.write_text("# benchmarks\n", encoding="utf-8")
    result = run("service", "--rows", "3000", "--analysts", "3", "--requests", "6", "--reference", "2",
                 "--heavy", "2", "--light", "3", "--workdir", str(tmp_path / "work"), "--out-dir", str(tmp_path / "out"), "--update-benchmarks",
                 "--benchmarks-file", str(bench_md))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    saved = json.loads((tmp_path / "out" / "service.json").read_text(encoding="utf-8"))
    assert len(saved["records"]) == 18 and {r["status"] for r in saved["records"]} <= {200, 422, 429}
    assert all(v["met"] for v in saved["verdicts"]), saved["verdicts"]
    assert saved["command"].startswith("python -m benchmarks service --rows 3000")
    text = bench_md.read_text(encoding="utf-8")
    assert "## python -m benchmarks service" in text and "requests / s" in text and "load average" in text
    heavy = saved["under_maximal"]
    assert [r["status"] for r in heavy["alone"] + heavy["loaded"]] == [200] * 6
    assert set(heavy["heavy_statuses"]) <= {"422"} and "while 2 maximal requests run" in text
    again = run("service", "--from-json", str(tmp_path / "out" / "service.json"), "--out-dir", str(tmp_path / "o2"))
    assert again.exit_code == 0 and "p50 / reference" in again.stdout


def test_quotas_and_the_plan():
    cfg = LoadConfig(requests=8)
    plan = request_plan(cfg, 0)
    assert [p["kind"] for p in plan] == ["explain", "identify"] * 4
    assert [p["notion"] for p in plan[1::2]] == ["sp", "dp", "sp", "dp"]
    assert plan == request_plan(cfg, 0) != request_plan(cfg, 1)


def test_a_broken_invariant_fails_its_verdict():
    ok = {"limit": 2.0, "spent": 1.0, "history_sum": 1.0, "answered_responses": 3, "answered_rows": 3}
    base = {"records": [{"status": 200}], "analysts": {"a": {"ocdp": ok}}, "verify": [],
            "units_after": {"t (ocdp)": {"spent": 1.0, "limit": 14.0}}}
    assert all(v["met"] for v in verdicts(base))
    broken = [
        {**base, "records": [{"status": 500}]},
        {**base, "analysts": {"a": {"ocdp": {**ok, "spent": 2.1, "history_sum": 2.1}}}},
        {**base, "analysts": {"a": {"ocdp": {**ok, "history_sum": 0.9}}}},
        {**base, "analysts": {"a": {"ocdp": {**ok, "answered_rows": 2}}}},
        {**base, "units_after": {"t (ocdp)": {"spent": 14.5, "limit": 14.0}}},
        {**base, "verify": ["t ocdp 1.0 != 0.9"]},
    ]
    for result in broken:
        assert sum(not v["met"] for v in verdicts(result)) == 1, result


def test_percentile_interpolates():
    assert percentile([], 0.5) is None and percentile([3.0], 0.95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert abs(percentile([float(x) for x in range(1, 101)], 0.95) - 95.05) < 1e-9


def test_bad_sizes_are_one_line():
    assert_error(run("service", "--analysts", "0"), "--analysts")


def test_help_has_an_example():
    result = run("service", "--help")
    assert result.exit_code == 0 and "python -m benchmarks service --update-benchmarks" in result.stdout


@pytest.mark.slow  # a real service and its clients: 13-26 s on 2 cores at load 8, minutes under more
def test_the_scaling_run_at_tiny_sizes(tmp_path):
    # Two settings, one repeat, both modes: a table with each setting's answered / s and the ratio.
    result = run("service", "--rows", "3000", "--workers", "1,2", "--searches", "processes,threads", "--repeats", "1",
                 "--clients", "2", "--burst", "4", "--workdir", str(tmp_path / "work"), "--out-dir", str(tmp_path / "out"))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    saved = json.loads((tmp_path / "out" / "service-scaling.json").read_text(encoding="utf-8"))
    assert [(r["mode"], r["workers"]) for r in saved["runs"]] == [("processes", 1), ("processes", 2), ("threads", 1),
                                                                  ("threads", 2)]
    assert all(r["answered"] == 4 and len(r["latencies"]) == 4 for r in saved["runs"])
    assert "vs the first row" in result.stdout and "1.00×" in result.stdout
    # Every run's CPU split: the service worked, and (processes) so did its search processes.
    assert all(r["cpu_s"]["server"] > 0 and r["cpu_s"]["clients"] > 0 for r in saved["runs"])
    assert all(r["cpu_s"]["searches"] > 0 for r in saved["runs"] if r["mode"] == "processes")


@pytest.mark.slow  # a real service and its clients: 13-26 s on 2 cores at load 8, minutes under more
@pytest.mark.parametrize("clients_as", ["processes", "http"])
def test_the_scaling_run_with_other_clients(tmp_path, clients_as):
    """A process per client, or threads on the standard library's http.client (and the service
    on one DuckDB thread). The service searches in its threads: the clients are what differ here
    (both search modes are the test above's); search processes add their start to every run."""
    asked = "1" if clients_as == "processes" else "auto,1"
    result = run("service", "--rows", "3000", "--workers", "1,2", "--repeats", "1", "--clients", "2", "--burst", "4",
                 "--searches", "threads", "--clients-as", clients_as, "--duckdb-threads", asked, "--workdir", str(tmp_path / "work"),
                 "--out-dir", str(tmp_path / "out"))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    saved = json.loads((tmp_path / "out" / "service-scaling.json").read_text(encoding="utf-8"))
    assert saved["clients_as"] == clients_as and f"({clients_as})" in result.stdout
    assert saved["duckdb_threads"] == asked.split(",") and f"--duckdb-threads {asked}" in saved["command"]
    assert [(r["duckdb_threads"], r["workers"]) for r in saved["runs"]] == [
        (t, w) for t in asked.split(",") for w in (1, 2)]
    assert all(r["answered"] == 4 and len(r["latencies"]) == 4 and r["cpu_s"]["clients"] > 0 for r in saved["runs"])
    if "auto" in asked:  # each row names its setting, and what auto came to on this machine
        assert "auto (" in result.stdout


def test_bad_duckdb_threads_are_one_line():
    assert_error(run("service", "--workers", "1,2", "--duckdb-threads", "auto,0"), "--duckdb-threads takes auto")


def test_the_cpu_split_counts_a_childs_work():
    import subprocess
    import sys

    from benchmarks.service_scaling import cpu_split

    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                              "while time.process_time() < end: pass\ntime.sleep(30)"])
    try:
        import os
        import time

        deadline = time.monotonic() + 20
        while cpu_split(os.getpid())["searches"] < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cpu_split(os.getpid())["searches"] >= 0.25
    finally:
        child.kill()
        child.wait()


def test_bad_scaling_options_are_one_line():
    assert_error(run("service", "--workers", "1,x"), "--workers")
    assert_error(run("service", "--workers", "1,2", "--searches", "forks"), "--searches")
    assert_error(run("service", "--workers", "1,2", "--samples", "0"), "--samples")
    assert_error(run("service", "--workers", "1,2", "--clients-as", "fibers"), "--clients-as")
