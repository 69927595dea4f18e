"""`pcor-sql budget verify|repair|migrate` and the history's outcome and analyst columns: the
history is the truth, from the command line."""

from __future__ import annotations

import json

import duckdb

from cli_helpers import FAST, QUERY, assert_clean_stderr, assert_error, invoke, stderr_lines


def _ok(*args: str):
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


def test_verify_repair_after_a_hand_edit(db):
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db))
    assert "every spent total matches the history" in _ok("budget", "verify", "--db", str(db)).stdout
    con = duckdb.connect(str(db))
    con.execute("UPDATE pcor.budget SET spent_epsilon = 0")  # a hand "reset" of the budget
    con.close()
    refused = assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(db)), "budget verify", "budget repair")
    assert "do not match its history" in refused
    verify = invoke("budget", "verify", "--db", str(db))
    assert verify.exit_code == 1
    assert "bundled:salaries" in verify.stdout and "+" not in verify.stdout.split("difference")[0]
    assert [line for line in stderr_lines(verify) if line.startswith("error: ")] == [
        "error: 1 spent total(s) differ from the history — reset them from the history with `pcor-sql budget repair`"]
    as_json = [json.loads(line) for line in invoke("budget", "verify", "--db", str(db), "--format", "json").stdout.splitlines()]
    assert as_json == [{"unit": "bundled:salaries", "notion": "ocdp", "spent_total": 0.0, "history_sum": 0.2}]
    assert "reset 1 total(s) from the history" in _ok("budget", "repair", "--db", str(db)).stdout
    assert "nothing to repair" in _ok("budget", "repair", "--db", str(db)).stdout
    _ok("budget", "verify", "--db", str(db))
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db))
    status = json.loads(_ok("budget", "status", "salaries", "--notion", "ocdp", "--db", str(db), "--format", "jsonl").stdout)
    assert status["spent"] == 0.4


def test_history_shows_outcome_and_analyst(db):
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db))
    table = _ok("budget", "history", "--db", str(db)).stdout
    assert "outcome" in table and "analyst" in table
    [row] = [json.loads(line) for line in _ok("budget", "history", "--db", str(db), "--format", "jsonl").stdout.splitlines()]
    assert {k: row[k] for k in ("analyst", "outcome", "reason", "refunded")} == {
        "analyst": None, "outcome": row["outcome"], "reason": None, "refunded": False}
    assert row["outcome"] in ("answered", "charged")


def test_an_old_ledger_is_refused_until_migrate(db):
    con = duckdb.connect(str(db))
    # The layout before schema `pcor` (sql/ledger.sql at 99ef44b), with salaries spent in full.
    con.execute("CREATE TABLE pcor_budget (dataset VARCHAR PRIMARY KEY, limit_epsilon DOUBLE, spent_epsilon DOUBLE,"
                " spent_residual DOUBLE, releases BIGINT, created_at TIMESTAMP, updated_at TIMESTAMP)")
    con.execute("CREATE TABLE pcor_release_history (release_id VARCHAR PRIMARY KEY, dataset VARCHAR, seq BIGINT,"
                " released_at TIMESTAMP, mechanism VARCHAR, epsilon DOUBLE, record_key VARCHAR, statement VARCHAR,"
                " spent_after DOUBLE)")
    con.execute("INSERT INTO pcor_budget VALUES ('salaries', 1.0, 1.0, 0, 1, now()::TIMESTAMP, now()::TIMESTAMP)")
    con.execute("INSERT INTO pcor_release_history VALUES ('r1', 'salaries', 1, now()::TIMESTAMP, 'bfs', 1.0, NULL,"
                " NULL, 1.0)")
    con.close()
    for command in (("explain-outlier", QUERY, *FAST), ("budget", "status"), ("budget", "verify")):
        error = assert_error(invoke(*command, "--db", str(db)), "older layout", "main.pcor_budget")
        assert error.endswith("migrate it with `pcor-sql budget migrate`: spent ε, limits and history are kept")
    lines = _ok("budget", "migrate", "--db", str(db)).stdout.splitlines()
    assert "moved 'salaries' (from main.pcor_budget, main.pcor_release_history) to bundled:salaries" in lines
    _ok("budget", "verify", "--db", str(db))
    assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(db)), "used up")
