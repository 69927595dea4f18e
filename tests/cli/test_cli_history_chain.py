"""`pcor-sql budget verify|heads|repair` and the history's hash chain (DESIGN.md §11): a rewrite
of the history that keeps the totals consistent is found, refuses releases, and is put back."""

from __future__ import annotations

import json

import duckdb

from cli_helpers import FAST, QUERY, assert_clean_stderr, assert_error, invoke, stderr_lines

from pcor_sql.ledger import history_chain_steps
from pcor_sql.ledger.store import Ledger

HALVE = ("UPDATE pcor.history SET epsilon = epsilon / 2, spent_after = spent_after / 2;"
         " UPDATE pcor.budget SET spent_epsilon = spent_epsilon / 2, spent_residual = spent_residual / 2")


def _ok(*args: str):
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


def _spent(db) -> float:
    status = _ok("budget", "status", "salaries", "--notion", "ocdp", "--db", str(db), "--format", "jsonl")
    return json.loads(status.stdout)["spent"]


def _released(db, times: int) -> list[str]:
    for _ in range(times):
        _ok("explain-outlier", QUERY, *FAST, "--db", str(db))
    history = _ok("budget", "history", "--db", str(db), "--format", "jsonl").stdout.splitlines()
    return [json.loads(line)["release_id"] for line in history]


def test_a_consistent_rewrite_is_found_refused_and_put_back(db, tmp_path):
    _ok("budget", "set-limit", "salaries", "1.0", "--db", str(db))
    ids = _released(db, 3)
    spent = _spent(db)
    verified = _ok("budget", "verify", "--db", str(db)).stdout
    assert "every history entry matches its hash chain (heads digest " in verified
    heads = tmp_path / "heads.jsonl"
    heads.write_text(_ok("budget", "heads", "--db", str(db), "--format", "json").stdout)
    assert verified.split("heads digest ")[1][:64] in _ok("budget", "heads", "--db", str(db)).stdout
    con = duckdb.connect(str(db))
    con.execute(HALVE)  # every ε halved, spent_after and the totals fixed to match
    con.close()
    verify = invoke("budget", "verify", "--db", str(db))
    assert verify.exit_code == 1
    assert [line for line in stderr_lines(verify) if line.startswith("error: ")] == [
        "error: 3 history entries differ from the hash chain, so releases are refused — `pcor-sql budget repair` puts"
        " back what the chain holds"]
    as_json = [json.loads(line)
               for line in invoke("budget", "verify", "--db", str(db), "--format", "json").stdout.splitlines()]
    assert [(d["unit"], d["entry"].split()[1], d["problem"]) for d in as_json] == [
        ("bundled:salaries", rid, "epsilon, spent_after differ from the chain") for rid in ids]
    assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(db)), "budget verify", "budget repair")
    repair = _ok("budget", "repair", "--db", str(db)).stdout
    assert all(rid in repair for rid in ids)
    assert "3 history entries differed from the hash chain" in repair and "recorded in the chain" in repair
    con = duckdb.connect(str(db))
    [(kinds,)] = con.execute("SELECT list(kind ORDER BY link) FROM pcor.history_chain").fetchall()
    con.close()
    assert kinds == ["charge", "change"] * 3 + ["repair"]
    _ok("budget", "verify", "--db", str(db), "--anchor", str(heads))
    assert _spent(db) == spent  # what was charged, not the halves
    _ok("explain-outlier", QUERY, *FAST, "--db", str(db))


def test_a_rewrite_that_recomputes_the_chain_is_found_only_against_kept_heads(db, tmp_path):
    _released(db, 2)
    heads = tmp_path / "heads.jsonl"
    heads.write_text(_ok("budget", "heads", "--db", str(db), "--format", "json").stdout)
    con = duckdb.connect(str(db))
    con.execute(HALVE)
    # An attacker who knows the code makes the chain again over the rewritten history.
    con.execute("DELETE FROM pcor.history_chain; DELETE FROM pcor.chain_heads")
    Ledger(con).transaction(history_chain_steps.build_missing)
    con.close()
    _ok("budget", "verify", "--db", str(db))  # the limit of a chain kept beside the history (history_chain)
    anchored = invoke("budget", "verify", "--db", str(db), "--anchor", str(heads))
    assert anchored.exit_code == 1
    assert "differs from the head kept outside the ledger" in anchored.stdout


def test_a_bad_anchor_file_is_one_line(db, tmp_path):
    bad = tmp_path / "heads.jsonl"
    bad.write_text('{"unit": "x"}\n')
    error = assert_error(invoke("budget", "verify", "--db", str(db), "--anchor", str(bad)),
                         "anchors: line 1 is not a chain head")
    assert "budget heads --format json" in error
    assert_error(invoke("budget", "verify", "--db", str(db), "--anchor", str(tmp_path / "none")), "cannot read")
