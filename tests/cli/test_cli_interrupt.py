"""Ctrl-C and batch sizes on the command line: what the ledger kept is said in one line."""

from __future__ import annotations

from cli_helpers import QUERY, assert_error, invoke

from pcor_sql.session import Session


def test_ctrl_c_during_a_release_says_not_charged_and_exits_130(monkeypatch, tmp_path):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "prepare_records", interrupt)
    ledger = str(tmp_path / "ledger.duckdb")
    result = invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--ledger", ledger)
    assert result.exit_code == 130, (result.stdout, result.stderr)
    assert "interrupted: not charged" in result.stderr and "Traceback" not in result.stderr
    status = invoke("budget", "history", "--ledger", ledger, "--format", "json")
    assert "interrupted" in status.stdout


def test_a_selector_picking_several_rows_says_how_many_and_the_total_before_it_runs(tmp_path):
    ledger = str(tmp_path / "ledger.duckdb")
    result = invoke("explain-outlier", "SELECT salary FROM salaries WHERE id IN (42, 171, 250)", "--ledger", ledger)
    assert_error(result, "picks 3 rows", "0.6 in total", "--max-records 3")
    assert "0 releases" in invoke("budget", "history", "--ledger", ledger).stdout or \
        invoke("budget", "history", "--ledger", ledger, "--format", "json").stdout.strip() == ""
