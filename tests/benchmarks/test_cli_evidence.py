"""`python -m benchmarks anomaly-evidence`: the SP vs DP error table over every record."""

from __future__ import annotations

import json
import sys

import duckdb
import pytest

import pcor_sql
from benchmarks.cli.evidence import DEFAULT_RUNS
from tests.benchmarks.app_helpers import assert_clean_stderr, assert_error, invoke

# One cell of the paper's claim on salaries (the bundled table): ε=0.5, β=20, r=500, k=1.
CLAIM = ("--relation", "salaries", "--columns", "salary", "--epsilons", "0.5", "--betas", "20", "--radii", "500", "--ks", "1")
SMALL = ("--relation", "salaries", "--columns", "salary", "--epsilons", "0.5,1", "--betas", "5,20", "--radii", "500", "--ks", "1,3")
KEYS = {
    "relation", "columns", "epsilon", "beta", "radius", "k", "norm", "records", "anomalies", "sensitive",
    "dp_error_anomalies", "sp_error_anomalies", "dp_error_normal", "sp_error_normal", "dp_error_overall", "sp_error_overall",
    "sim_dp_error_anomalies", "sim_sp_error_anomalies", "sim_dp_error_overall", "sim_sp_error_overall",
}


def _ok(*args: str):
    result = invoke("anomaly-evidence", *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


def _json_rows(*args: str) -> list[dict]:
    return [json.loads(line) for line in _ok(*args, "--format", "json").stdout.splitlines()]


def _cells(run) -> int:
    return len(run.epsilons) * len(run.radii) * sum(1 for b in run.betas for k in run.ks if k <= int(b) + 1)


def test_help_carries_an_example():
    result = invoke("anomaly-evidence", "--help")
    assert result.exit_code == 0
    assert "Example:" in result.stdout and "python -m benchmarks anomaly-evidence --relation salaries" in result.stdout
    assert "anomaly-evidence" in invoke("--help").stdout


def test_default_run_is_a_table_per_bundled_relation():
    result = _ok()
    out = result.stdout
    assert "salaries on salary (51000 records, norm l2)" in out
    assert "homicides on victim_age (110000 records, norm l2)" in out
    assert "SP err (anom.)" in out and "DP err (anom.)" in out
    footnotes = [line.strip() for line in out.splitlines() if "rates are exact expectations" in line]
    assert [f.split(" rows")[0] for f in footnotes] == [str(_cells(run)) for run in DEFAULT_RUNS]
    assert result.stderr == ""


def test_default_run_json_has_every_grid_cell_with_stable_keys():
    rows = _json_rows()
    assert len(rows) == sum(_cells(run) for run in DEFAULT_RUNS)
    for row in rows:
        assert set(row) == KEYS
    by_relation = {r["relation"]: r for r in rows}
    assert by_relation["salaries"]["columns"] == ["salary"] and by_relation["salaries"]["records"] == 51_000
    assert by_relation["homicides"]["columns"] == ["victim_age"] and by_relation["homicides"]["records"] == 110_000
    # Construction 1 never errs more under SP than under DP (λ_k ≤ Δ_G), on any group.
    for r in rows:
        assert r["sp_error_overall"] <= r["dp_error_overall"] + 1e-12
        if r["anomalies"]:
            assert r["sp_error_anomalies"] <= r["dp_error_anomalies"] + 1e-12
        else:
            assert r["dp_error_anomalies"] is None and r["sp_error_anomalies"] is None


def test_the_papers_claim_on_salaries():
    """At ε=0.5, β=20, r=500, k=1 the SP mechanism's error on true anomalies is below half the DP
    mechanism's (exact expectations, no randomness: 0.044 vs 0.378 when written)."""
    (row,) = _json_rows(*CLAIM)
    assert (row["epsilon"], row["beta"], row["radius"], row["k"]) == (0.5, 20.0, 500.0, 1)
    assert row["anomalies"] > 0
    assert row["sp_error_anomalies"] < 0.5 * row["dp_error_anomalies"]
    # Away from the anomalies both mechanisms have λ = Δ_G, so the same error.
    assert row["sp_error_normal"] == pytest.approx(row["dp_error_normal"])


def test_grid_options_replace_the_default_axes():
    rows = _json_rows("--epsilons", "0.5", "--ks", "1")
    assert {r["relation"] for r in rows} == {"salaries", "homicides"}
    assert {r["epsilon"] for r in rows} == {0.5} and {r["k"] for r in rows} == {1}
    assert {r["radius"] for r in rows if r["relation"] == "salaries"} == set(DEFAULT_RUNS[0].radii)


def test_markdown_format():
    out = _ok(*SMALL, "--format", "markdown").stdout
    lines = out.splitlines()
    assert lines[0] == "### salaries on salary (51000 records, norm l2)"
    assert lines[2].startswith("| ε | β | r | k | anomalies | DP err (anom.) | SP err (anom.) |")
    assert lines[3] == "|" + "---|" * 11
    table = [line for line in lines[4:] if line.startswith("| ")]
    assert len(table) == 8 and all(line.count("|") == 12 for line in table)
    assert "(8 rows in " in out and "exact expectations over every record" in out


def test_simulation_adds_columns_next_to_the_exact_rates():
    out = _ok(*CLAIM, "--trials", "5", "--seed", "7", "--format", "markdown").stdout
    assert "sim DP (anom.)" in out and "simulated: 5 seeded run(s), seed 7" in out
    (row,) = _json_rows(*CLAIM, "--trials", "5", "--seed", "7")
    # 5 × 609 anomaly answers: a binomial rate within 5 standard deviations of its expectation.
    p, n = row["dp_error_anomalies"], 5 * row["anomalies"]
    assert abs(row["sim_dp_error_anomalies"] - p) <= 5 * (p * (1 - p) / n) ** 0.5


def test_a_k_that_fits_only_some_betas_is_skipped_there_with_a_warning():
    result = invoke("anomaly-evidence", *CLAIM[:6], "--betas", "1,20", "--radii", "500", "--ks", "3", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert_clean_stderr(result)
    assert [json.loads(line)["beta"] for line in result.stdout.splitlines()] == [20.0]
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert "k = 3" in warning and "β = 1 " in warning


def test_plot_without_matplotlib_is_a_warning_not_an_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    target = tmp_path / "evidence.png"
    result = invoke("anomaly-evidence", *CLAIM, "--plot", str(target))
    assert result.exit_code == 0, result.stderr
    assert_clean_stderr(result)
    assert result.stderr.splitlines() == [
        f"warning: matplotlib is not installed: no plot written to {str(target)!r} (pip install 'pcor-sql[plot]')"
    ]
    assert "salaries on salary" in result.stdout and not target.exists()


def test_plot_with_matplotlib_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "evidence.png"
    _ok(*SMALL, "--plot", str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def db(tmp_path):
    """A DuckDB file holding the bundled salaries table."""
    path = tmp_path / "salaries.duckdb"
    con = duckdb.connect(str(path))
    pcor_sql.load_dataset(con, "salaries")
    con.close()
    return path


def test_db_file(db):
    (row,) = _json_rows(*CLAIM, "--db", str(db))
    assert row["records"] == 51_000


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--relation", "salaries", "--columns", "nope"), ("nope", "column")),
        (("--relation", "salaries", "--columns", "job_title"), ("job_title", "not a number")),
        (("--relation", "no_such_table", "--columns", "x"), ("no_such_table",)),
        (("--epsilons", "0.5,0"), ("epsilon must be > 0",)),
        (("--epsilons", "-1"), ("epsilon must be > 0",)),
        (("--epsilons", "abc"), ("--epsilons", "not a number")),
        (("--epsilons", "inf"), ("--epsilons", "finite")),
        (("--epsilons", "0.5,,1"), ("--epsilons", "empty item")),
        (("--ks", "0"), ("k = 0", "outside 1..")),
        (("--ks", "99"), ("k = 99", "outside 1..", "--ks between 1 and 21")),
        (("--relation", "salaries", "--columns", "salary", "--betas", "5", "--ks", "7"), ("k = 7", "between 1 and 6")),
        (("--ks", "1.5"), ("--ks", "not an integer")),
        (("--betas", "0.5"), ("beta must be ≥ 1",)),
        (("--radii", "-1"), ("radius must be ≥ 0",)),
        (("--norm", "l3"), ("unknown norm",)),
        (("--trials", "3"), ("--trials needs --seed",)),
        (("--trials", "-1", "--seed", "1"), ("--trials must be at least 0",)),
        (("--columns", "salary"), ("--columns needs --relation",)),
        (("--relation", "salaries"), ("--relation needs --columns",)),
        (("--format", "csv"), ("--format",)),
        (("--plot", "/no/such/folder/x.png"), ("--plot", "does not exist")),
        (("--db", "/no/such/file.duckdb"), ("does not exist",)),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(args, needles):
    assert_error(invoke("anomaly-evidence", *args), *needles)
