"""Smoke tests of `python -m benchmarks bench` and `reproduce`: tiny settings, every output
file, BENCHMARKS.md sections, option errors; and the commands are no longer pcor-sql's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pcor_sql
from benchmarks.profiles import profile
from tests.benchmarks.app_helpers import assert_error, invoke as run
from tests.cli.cli_helpers import invoke as pcor_sql_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["bench", "reproduce", "explore", "anomaly-evidence", "spark-scale", "verifiers", "batch"])
def test_help_has_an_example(command):
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.stdout and f"python -m benchmarks {command}" in result.stdout


@pytest.mark.parametrize("command", ["bench", "reproduce", "explore", "anomaly-evidence"])
def test_the_commands_left_pcor_sql(command):
    assert command not in pcor_sql_cli("--help").stdout
    assert_error(pcor_sql_cli(command, "--help"), "no such command")
    assert command in run("--help").stdout


def test_python_m_benchmarks_runs_from_the_checkout():
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "Usage: python -m benchmarks" in out.stdout, out.stderr


def test_bench_smoke(tmp_path):
    out, md = tmp_path / "out", tmp_path / "BENCHMARKS.md"
    result = run("bench", "--quick", "--datasets", "salaries", "--searches", "random-walk", "--verifiers", "zscore",
                 "--repeats", "2", "--no-direct", "--big-rows", "60000", "--out-dir", str(out),
                 "--update-benchmarks", "--benchmarks-file", str(md))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "bench.json").read_text())
    (cell,) = data["releases"]
    where = (cell["dataset"], cell["search"], cell["verifier"], cell["record"])
    assert where == ("salaries", "random-walk", "zscore", 42)
    assert cell["end_to_end"]["repeats"] == 2 and cell["naive"]["repeats"] == 1
    assert cell["speedup_end_to_end"] > 0 and cell["compared_releases"] == 1
    assert [p["verifier"] for p in data["per_context"]] == ["zscore"]
    assert data["summary"][0]["rows"] == 51_000
    assert data["big"]["rows"] == 60_000 and data["big"]["peak_rss_bytes"] > 0
    verdicts = {t["name"]: t["met"] for t in data["targets"]}
    assert len(verdicts) == 6 and verdicts[next(n for n in verdicts if n.startswith("peak memory"))] is True
    text = md.read_text()
    assert "<!-- pcor-sql bench:begin -->" in text and "`python -m benchmarks bench --quick --repeats 2" in text
    assert "Targets" in result.stdout and "machine:" in (out / "bench.md").read_text()


def test_reproduce_smoke(tmp_path):
    out = tmp_path / "out"
    md_file = tmp_path / "B.md"
    result = run("reproduce", "--datasets", "homicides", "--records", "1", "--repeats", "1", "--groups", "verifiers",
                 "--match-datasets", "homicides", "--match-outliers", "2", "--match-neighbours", "1",
                 "--no-figures", "--out-dir", str(out), "--update-benchmarks", "--benchmarks-file", str(md_file),
                 "--benchmarks-section", "reproduce-small")
    assert result.exit_code == 0, result.output
    data = json.loads((out / "reproduce.json").read_text())
    reduced = data["datasets"]["homicides"]["reduced"]  # Tables 6–7 run on the paper's reduced table
    assert set(reduced["records"]) <= set(pcor_sql.planted_outliers("homicides")) and len(reduced["records"]) > 1
    assert reduced["cross_check"]["equal"] is True
    for prof, accounting in (("paper", "paper"), ("engine", "tight")):
        cells = {c["cell"]["verifier"]: c for c in data["profiles"][prof]["homicides"]["cells"]}
        assert set(cells) == {"grubbs", "histogram", profile(prof).lof, "zscore"}  # LOF with the profile's rule
        for c in cells.values():
            assert c["cell"]["accounting"] == accounting and c["cell"]["table"] == "reduced"
            assert c["releases"] == len(reduced["records"]) and all(0 < r <= 1.0 for r in c["ratios"])
        if prof == "paper":  # Algorithm 5 from V's cell
            assert all(c["cell"]["descents"] == 0 and c["cell"]["start"] == "cell" for c in cells.values())
    assert {m["verifier"] for m in data["match"]} == {"grubbs", "lof", "histogram", "zscore"}
    assert all(len(m["pairs"]) == 2 * 4 for m in data["match"])  # 2 outliers × ΔD ∈ {1, 5, 10, 25}
    md = (out / "reproduce.md").read_text()
    assert "Table 6: Outlier detection algorithms" in md and "Table 13: COE match" in md and "§6.7" in md
    assert "<!-- pcor-sql reproduce-small:begin -->" in md_file.read_text()
    assert "--benchmarks-section reproduce-small" in md_file.read_text()


@pytest.mark.parametrize("args", [
    ("bench", "--repeats", "0"),
    ("bench", "--datasets", "diamonds"),
    ("reproduce", "--groups", "nope"),
    ("reproduce", "--records", "0"),
    ("reproduce", "--profile", "fast"),
    ("reproduce", "--from-json", "no/such/reproduce.json"),
    ("reproduce", "--resume", "--out-dir", "no/such/dir"),
    ("explore", "--verifiers", "zscore"),
    ("explore", "--repeats", "0"),
    ("bench", "--benchmarks-section", "a b", "--no-big", "--no-naive", "--datasets", "homicides",
     "--searches", "random-walk", "--verifiers", "zscore", "--repeats", "1", "--update-benchmarks"),
])
def test_bad_options_are_user_errors(args):
    assert_error(run(*args))


def test_reproduce_lays_out_saved_results_again(tmp_path):
    out = tmp_path / "out"
    first = run("reproduce", "--datasets", "homicides", "--groups", "verifiers", "--repeats", "1", "--no-match",
                "--no-figures", "--profile", "paper", "--out-dir", str(out / "a"))
    assert first.exit_code == 0, first.output
    again = run("reproduce", "--from-json", str(out / "a" / "reproduce.json"), "--no-figures", "--out-dir", str(out / "b"))
    assert again.exit_code == 0, again.output
    a = json.loads((out / "a" / "reproduce.json").read_text())
    b = json.loads((out / "b" / "reproduce.json").read_text())
    assert a["profiles"] == b["profiles"] and a["datasets"] == b["datasets"]
    assert "Table 7: Outlier detection algorithms" in (out / "b" / "reproduce.md").read_text()


def test_explore_smoke(tmp_path):
    result = run("explore", "--quick", "--datasets", "homicides", "--verifiers", "histogram", "--out-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "explore.json").read_text())
    assert {(s["verifier"], s["epsilon"]) for s in data["settings"]} == {("histogram", 0.2), ("histogram", 0.05)}
    for s in data["settings"]:
        for search in ("explore", "bfs"):
            assert len(s[search]["ratios"]) == 3 and all(0 < r <= 1.0 for r in s[search]["ratios"])
            # The released context is one of the candidates: the best candidate is at least as good.
            assert all(r <= c <= 1.0 for r, c in zip(s[search]["ratios"], s[search]["collected"], strict=True))
    assert {t["name"].split(":")[0] for t in data["targets"]} >= {"explore's mean time per release ≤ BFS's"}
    assert "best context not collected" in (tmp_path / "explore.md").read_text()
    assert "§6.7 for explore" in (tmp_path / "explore.md").read_text() or not data["leakage"]


def test_explore_misses_split_exploration_from_selection():
    from benchmarks.explore_targets import _explore_misses

    setting = {"verifier": "lof", "epsilon": 0.2,
               "explore": {"ratios": [1.0, 0.95, 0.95, 0.999], "collected": [1.0, 0.95, 1.0, 0.98]}}
    # Below 0.99: the 2nd (best never collected) and the 3rd (collected, lost in the EM's spread).
    assert _explore_misses({"settings": [setting]}, "lof", 0.2) == 1
    assert _explore_misses({"settings": [setting]}, "lof", 0.05) == 0
    old = {"settings": [{**setting, "explore": {"ratios": [0.5]}}]}  # a result file from before the diagnostic
    assert _explore_misses(old, "lof", 0.2) is None
