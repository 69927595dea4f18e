"""`pcor-sql analyst add|list|revoke|quota`: the token is printed once, as the last line."""

from __future__ import annotations

import json

import duckdb

from pcor_sql.ledger.analysts import authenticate
from pcor_sql.ledger.store import Ledger

from cli_helpers import assert_clean_stderr, assert_error, invoke


def _ok(*args: str):
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


def test_add_list_quota_revoke(db):
    _ok("dataset", "add", "people", "salaries", "--key", "id", "--metric", "salary", "--by", "job_title",
        "--limit", "5", "--db", str(db))
    added = _ok("analyst", "add", "ana", "--quota", "1.5", "--datasets", "people", "--db", str(db)).stdout
    token = added.splitlines()[-1]
    assert "analyst ana added: ocdp ε ≤ 1.5, dp ε ≤ 1.5, sp ε ≤ 1.5; datasets: people" in added
    con = duckdb.connect(str(db))
    assert authenticate(Ledger(con), token).name == "ana"
    con.close()
    second = _ok("analyst", "add", "bob", "--quota", "0.5", "--notion", "dp", "--db", str(db)).stdout
    assert second.splitlines()[-1] != token and "dp ε ≤ 0.5; datasets: all registered datasets" in second
    listed = [json.loads(line) for line in _ok("analyst", "list", "--db", str(db), "--format", "json").stdout.splitlines()]
    assert [a["name"] for a in listed] == ["ana", "bob"] and token not in json.dumps(listed)
    assert "ana" in _ok("analyst", "list", "--db", str(db)).stdout
    _ok("analyst", "quota", "bob", "2", "--notion", "ocdp", "--db", str(db))
    _ok("analyst", "quota", "bob", "--clear", "--notion", "dp", "--db", str(db))
    [bob] = [a for a in (json.loads(line) for line in invoke("analyst", "list", "--db", str(db), "--format", "json")
                         .stdout.splitlines()) if a["name"] == "bob"]
    assert {u["notion"]: u["limit"] for u in bob["usage"] if u["dataset"] is None} == {"ocdp": 2.0, "dp": None, "sp": None}
    assert "analyst ana revoked" in _ok("analyst", "revoke", "ana", "--db", str(db)).stdout
    con = duckdb.connect(str(db))
    assert authenticate(Ledger(con), token) is None
    con.close()


def test_bad_input_is_one_line(db):
    assert_error(invoke("analyst", "add", "a b", "--db", str(db)), "invalid analyst name")
    assert_error(invoke("analyst", "add", "ana", "--quota", "-1", "--db", str(db)), "quota")
    assert_error(invoke("analyst", "add", "ana", "--quota", "x", "--db", str(db)), "must be a number")
    assert_error(invoke("analyst", "add", "ana", "--quota", "1", "--notion", "xdp", "--db", str(db)), "notion")
    assert_error(invoke("analyst", "add", "ana", "--datasets", "nope", "--db", str(db)), "no registered dataset")
    assert_error(invoke("analyst", "revoke", "nobody", "--db", str(db)), "no analyst named")
    assert_error(invoke("analyst", "quota", "nobody", "1", "--db", str(db)), "no analyst named")
    _ok("analyst", "add", "ana", "--db", str(db))
    assert_error(invoke("analyst", "add", "ana", "--db", str(db)), "already")
