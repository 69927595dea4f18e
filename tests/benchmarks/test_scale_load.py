"""`python -m benchmarks scale` and the load average: every timed sample records the 1-minute
load before it, every ratio is shown with its load, and BENCHMARKS.md is not written from a
busy machine unless --force (then the section says so). The measuring child runs on a tiny
table here; the full run is BENCHMARKS.md's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.scale as scale
import benchmarks.scale_goals as goals
import benchmarks.scale_measure as measure
from benchmarks.measure import machine
from benchmarks.scale_tables import ensure_table
from tests.benchmarks.app_helpers import assert_error, invoke


def saved_result(tmp_path: Path, loads: list[float]) -> Path:
    """A scale.json with one base case whose samples were read at `loads`."""
    n = len(loads)
    case = {
        "name": "base", "shape": "base", "rows": 2_000, "verifier": "lof", "free_bits": 57, "cells": 1_200,
        "fresh": n, "warm": n, "reference": n, "nice": 0,
        "reference_s": [0.1] * n, "reference_load": loads, "fresh_s": [0.2] * n, "fresh_load": loads,
        "warm_same_s": [0.01] * n, "warm_same_load": loads, "warm_s": [0.05] * n, "warm_load": loads,
        "warm_other_s": [0.1] * n, "warm_other_load": loads, "summary_build_s": [0.05] * n,
        "summary_threads_s": {"1": [0.125] * n, "2": [0.075] * n},
        "summary_bytes": 16_000, "peak_rss_bytes": 2**28, "contexts_verified": [900] * n, "start_checks": [300] * n,
        "warm_contexts_verified": [100] * n, "warm_other_contexts_verified": [900] * n,
    }
    result = {"config": {}, "machine": machine(), "started": "2026-01-01T00:00:00+00:00", "wall_s": 1.0,
              "load": {"start": [loads[0], 1.0, 1.0], "end": [loads[-1], 1.0, 1.0]}, "tables": {},
              "cases": [case], "lattice": [], "command": "python -m benchmarks scale"}
    result["targets"] = [t.as_dict() for t in goals.targets(result)]
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path


def test_ratios_carry_the_load_of_their_samples():
    case = {"fresh_load": [0.9, 1.3], "reference_load": [0.7, None]}
    assert goals.ratio_loads(case, "fresh_s") == (0.7, 1.3)
    assert goals.load_text((0.7, 1.3)) == "load 0.7–1.3" and goals.load_text((1.0, 1.04)) == "load 1.0"
    assert goals.load_text(None) == "load ?"
    assert goals.ratio_loads({"fresh_load": [2.0]}, "fresh_s", {"reference_load": [0.5]}) == (0.5, 2.0)
    result = {"cases": [case, {"warm_load": [4.2]}], "load": {"start": [0.4, 1, 1], "end": [1.1, 1, 1]}}
    assert goals.busiest_load(result) == 4.2
    assert goals.busiest_load({"cases": [], "load": {}}) is None


def test_the_child_records_a_load_beside_every_timed_sample(tmp_path):
    table = ensure_table(tmp_path, "base", 2_000, lambda _m: None)
    out = measure.measure(table["path"], "grubbs", fresh=1, warm=1, seed=1, reference=2)
    for key in measure.TIMED:
        loads = out[key.removesuffix("_s") + "_load"]
        assert len(loads) == len(out[key]) >= 1
        assert all(x is None or x >= 0 for x in loads)
    assert len(out["start_checks"]) == 1 and 1 <= out["start_checks"][0] <= 300


def test_the_child_times_the_summary_build_at_threads_1_and_2_and_resets_the_setting(tmp_path):
    import duckdb

    table = ensure_table(tmp_path, "base", 2_000, lambda _m: None)
    out = measure.measure(table["path"], "lof", fresh=2, warm=0, seed=1, reference=0)
    assert sorted(out["summary_threads_s"]) == ["1", "2"]
    assert all(len(xs) == 2 and all(x > 0 for x in xs) for xs in out["summary_threads_s"].values())
    con = duckdb.connect(table["path"])
    default = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
    con.execute("SET threads = 1")
    measure.summary_at_threads(con, "lof", 1)
    assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == default


def test_benchmarks_md_is_written_from_a_quiet_run(tmp_path):
    bench = tmp_path / "BENCHMARKS.md"
    path = saved_result(tmp_path, [0.6, 1.2])
    r = invoke("scale", "--from-json", str(path), "--update-benchmarks", "--benchmarks-file", str(bench),
               "--out-dir", str(tmp_path / "out"))
    assert r.exit_code == 0, r.stderr
    text = bench.read_text(encoding="utf-8")
    assert "2.00× (load 0.6–1.2)" in text and "--force" not in text
    assert "| summary build, threads = 1 | threads = 2 |" in text
    assert "| 125.0 ms (125.0 ms–125.0 ms) | 75.0 ms (75.0 ms–75.0 ms) |" in text
    assert "≤ 1.00× the reference" in text and "2.00× the reference (load 0.6–1.2)" in text


def test_a_busy_run_is_refused_unless_forced_and_then_says_so(tmp_path):
    bench = tmp_path / "BENCHMARKS.md"
    path = saved_result(tmp_path, [0.9, 2.4])
    args = ["scale", "--from-json", str(path), "--update-benchmarks", "--benchmarks-file", str(bench),
            "--out-dir", str(tmp_path / "out")]
    refused = invoke(*args)
    assert refused.exit_code != 0 and refused.stderr.strip().splitlines()[-1].startswith("error: BENCHMARKS.md not written")
    assert "Traceback" not in refused.stderr
    assert not bench.exists() and (tmp_path / "out" / "scale.md").exists()
    r = invoke(*args, "--force")
    assert r.exit_code == 0, r.stderr
    assert "reached 2.40 during the run" in bench.read_text(encoding="utf-8")


def test_a_busy_machine_is_refused_before_measuring(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "load_now", lambda: 3.25)

    def no_run(*_a, **_k):
        pytest.fail("measured on a busy machine")

    monkeypatch.setattr(scale, "run_scale", no_run)
    r = invoke("scale", "--update-benchmarks", "--benchmarks-file", str(tmp_path / "B.md"), "--out-dir", str(tmp_path))
    assert_error(r, "3.25")


def test_the_5000_value_case_releases_with_zscore_and_lof_on_100k_rows():
    cases = scale.plan(scale.ScaleConfig(cases=("wide5000",), wide_repeats=2))
    assert [(c.shape, c.rows, c.verifier, c.fresh) for c in cases] == [
        ("wide5000", 100_000, "zscore", 2), ("wide5000", 100_000, "lof", 2)]
    assert scale.free_bits("wide5000") == 5002
