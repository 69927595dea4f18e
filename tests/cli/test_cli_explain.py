"""`pcor-sql explain-outlier`: the three output formats, the JSON keys, owner view, several records."""

from __future__ import annotations

import csv
import io
import json

import duckdb

from cli_helpers import FAST, QUERY, assert_clean_stderr, invoke

from pcor_sql.engine.datasets import declared_domains

# The keys every explanation object has (DESIGN.md §5 "The explain-outlier command") (the README documents them).
STABLE_KEYS = {
    "record", "context", "predicate", "explanation_sql", "epsilon", "epsilon1", "accounting", "search",
    "samples", "verifier", "utility", "start_source", "seeded", "summary", "privacy_summary", "metric", "selector",
}


def _ok(*args: str):
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert_clean_stderr(result)
    return result


def test_table_format_shows_the_released_context_and_the_privacy_parameters():
    result = _ok("explain-outlier", QUERY, *FAST, "--epsilon", "0.3")
    out = result.stdout
    lines = out.splitlines()
    # The first line says it in plain words, from released values only.
    assert lines[0].startswith("salary of the record where id = 42 is an outlier (Grubbs' test, alpha = 0.05) among ")
    assert "187190" not in lines[0] and "Registered Nurse" not in lines[0]
    assert "record      id=42" in out
    assert "job_title ∈ {" in out and "year" in out
    assert "privacy cost ε = 0.3 (output-constrained DP) over 51 randomized choices of ε1 = 0.00588 each" in out
    assert lines[-1] == "terms (ε, ε1, OCDP, utility, ...): pcor-sql glossary"
    assert "bfs, 50 samples" in out
    assert "found by a validity-only search" in out
    assert "seeded: not for real releases" in out
    assert "NOT FOR RELEASE" not in out and "population" not in out.replace("utility population", "")
    # The default database is in memory; its ledger is the per-user file, and the bundled table
    # is the same unit there in every run.
    assert "in memory" not in result.stderr and "charged to bundled:salaries" in out


def test_owner_view_only_with_the_flag():
    plain = json.loads(_ok("explain-outlier", QUERY, *FAST, "--format", "jsonl").stdout)
    assert "owner" not in plain
    owner = json.loads(_ok("explain-outlier", QUERY, *FAST, "--format", "jsonl", "--owner-view").stdout)
    assert owner["owner"]["not_for_release"] is True
    assert owner["owner"]["population"] >= 1
    table = _ok("explain-outlier", QUERY, *FAST, "--owner-view").stdout
    assert "NOT FOR RELEASE" in table and "population" in table


def test_json_keys_and_values():
    result = _ok("explain-outlier", QUERY, *FAST, "--format", "jsonl", "--search", "dfs", "--samples", "7")
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    e = json.loads(lines[0])
    assert STABLE_KEYS <= set(e)
    assert e["record"]["id"] == 42
    assert e["search"] == "dfs" and e["samples"] == 7 and e["accounting"] == "tight"
    assert e["epsilon"] == 0.2 and e["epsilon1"] < e["epsilon"]
    assert e["seeded"] is True and "not for real releases" in e["warning"]
    assert e["verifier"].startswith("grubbs")
    assert e["start_source"] in ("search", "user", "none")
    domains = declared_domains("salaries")
    for attribute, values in e["context"].items():
        assert values and values == [v for v in domains[attribute] if v in values]  # domain order
        assert e["record"][attribute] in values  # the record is in its released context


def test_seed_makes_the_release_reproducible():
    first = json.loads(_ok("explain-outlier", QUERY, *FAST, "--format", "jsonl").stdout)
    second = json.loads(_ok("explain-outlier", QUERY, *FAST, "--format", "jsonl").stdout)
    assert first["context"] == second["context"]


def test_sql_format_is_the_runnable_explanation_query():
    result = _ok("explain-outlier", QUERY, *FAST, "--format", "sql")
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("SELECT salary FROM salaries WHERE ") and lines[0].endswith(";")
    con = duckdb.connect()
    try:
        from pcor_sql.engine.datasets import load_dataset

        load_dataset(con, "salaries")
        assert con.execute(lines[0]).fetchall()
    finally:
        con.close()


def test_several_records_give_several_json_lines():
    several = ("explain-outlier", "SELECT salary FROM salaries WHERE id IN (42, 171)", "--max-records", "2", *FAST)
    result = _ok(*several, "--format", "jsonl")
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["record"]["id"] for o in objects] == [42, 171]
    assert json.loads(_ok(*several, "--format", "json").stdout) == objects  # one document: a list
    table = _ok(*several).stdout
    assert "1 of 2: salary of the record where id = 42 is an outlier" in table
    assert "2 of 2: salary of the record where id = 171 is an outlier" in table
    rows = list(csv.DictReader(io.StringIO(_ok(*several, "--format", "csv").stdout)))
    assert [r["record.id"] for r in rows] == ["42", "171"]
    assert rows[0]["context.job_title"].split("|") == objects[0]["context"]["job_title"]
    assert rows[0]["units"] == "bundled:salaries" and all("{" not in v for r in rows for v in r.values())


def test_options_reach_the_library(db):
    _ok("dataset", "add", "payroll", "salaries", "--key", "id", "--metric", "salary", "--by", "job_title,year",
        "--db", str(db))
    start = "job_title = 'Registered Nurse' AND year = '2018'"  # the record's own cell
    result = _ok(
        "explain-outlier", QUERY, "--verifier", "grubbs", "--verifier-option", "alpha=0.1", "--seed", "3", "--allow-seeded",
        "--by", "job_title,year", "--search", "random-walk", "--samples", "5", "--utility", "overlap",
        "--start", start, "--accounting", "paper",
        "--epsilon", "0.5", "--dataset", "payroll", "--max-contexts", "100000", "--db", str(db), "--format", "jsonl",
    )
    e = json.loads(result.stdout)
    assert e["verifier"] == "grubbs(alpha=0.1)"
    assert set(e["context"]) == {"job_title", "year"}
    assert (e["search"], e["samples"], e["utility"], e["accounting"]) == ("random-walk", 5, "overlap", "paper")
    assert e["start_source"] == "user"
    assert e["epsilon1"] == 0.25  # paper accounting of a random walk: ε = 2·ε1
    assert e["dataset"] == "payroll"
    assert "in memory" not in result.stderr  # a file database keeps its ledger


def test_budget_is_shown_once_a_limit_is_set(db):
    assert invoke("budget", "set-limit", "main.salaries", "2", "--db", str(db)).exit_code == 0
    e = json.loads(_ok("explain-outlier", QUERY, *FAST, "--db", str(db), "--format", "jsonl").stdout)
    assert e["budget"] == {"spent": 0.2, "limit": 2.0} and e["units"] == ["bundled:salaries"]
    table = _ok("explain-outlier", QUERY, *FAST, "--db", str(db)).stdout
    assert "spent ε = 0.4 of limit 2" in table


def test_search_option_sets_any_request_option_by_name():
    result = invoke("explain-outlier", QUERY, *FAST, "--search-option", "descents=0", "--search-option", "samples=5",
                    "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert (out["descents"], out["samples"]) == (0, 5)
    bad = invoke("explain-outlier", QUERY, *FAST, "--search-option", "speed=3")
    assert bad.exit_code == 2 and "unknown option 'speed'" in bad.stderr
