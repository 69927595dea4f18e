"""Bad input to the CLI: exit code 2, one `error:` line naming the problem, no traceback,
nothing printed, nothing charged — and SQL injection attempts stay inert."""

from __future__ import annotations

import os

import duckdb
import pytest

from cli_helpers import FAST, QUERY, assert_clean_stderr, assert_error, invoke

import pcor_sql.api
from pcor_sql.engine.datasets import declared_domains

# job_title as VARCHAR: a column with no ENUM type, hence no declared domain.
VARCHAR_QUERY = (
    "SELECT salary FROM (SELECT id, salary, CAST(job_title AS VARCHAR) AS job_title, year FROM salaries) "
    "WHERE id = 42"
)


def _with_metric(expression: str) -> str:
    """The salaries table whose metric for record 42 is `expression`."""
    return (
        f"SELECT m FROM (SELECT *, CASE WHEN id = 42 THEN {expression} ELSE salary END AS m FROM salaries) "
        "WHERE id = 42"
    )


EXPLAIN_CASES = [
    ("sql syntax error", ["SELEC salary FROM salaries WHERE id = 42"], "syntax error"),
    ("unknown table", ["SELECT salary FROM no_such_table WHERE id = 42"], "no_such_table"),
    ("unknown metric column", ["SELECT no_such_col FROM salaries WHERE id = 42"], "no_such_col"),
    ("unknown column in selector", ["SELECT salary FROM salaries WHERE no_such_col = 42"], "no_such_col"),
    ("metric not numeric", ["SELECT job_title FROM salaries WHERE id = 42"], "not a number"),
    ("metric NULL for V", [_with_metric("NULL"), "--by", "job_title,year"], "metric is NULL"),
    ("metric NaN for V", [_with_metric("'NaN'::DOUBLE"), "--by", "job_title,year"], "metric is nan"),
    ("selector matches no row", ["SELECT salary FROM salaries WHERE id = -1"], "selects no row"),
    ("no selector", ["SELECT salary FROM salaries"], "no WHERE clause"),
    ("epsilon zero", [QUERY, "--epsilon", "0"], "epsilon"),
    ("epsilon negative", [QUERY, "--epsilon", "-1"], "epsilon"),
    ("epsilon nan", [QUERY, "--epsilon", "nan"], "epsilon"),
    ("epsilon inf", [QUERY, "--epsilon", "inf"], "epsilon"),
    ("samples zero", [QUERY, "--samples", "0"], "samples"),
    ("samples negative", [QUERY, "--samples", "-3"], "samples"),
    ("unknown verifier", [QUERY, "--verifier", "nope"], "unknown verifier 'nope'"),
    ("malformed verifier spec", [QUERY, "--verifier", "lof(k="], "verifier spec"),
    ("unknown verifier option in spec", [QUERY, "--verifier", "grubbs(k=3)"], "unknown option 'k'"),
    ("unknown --verifier-option", [QUERY, "--verifier", "grubbs", "--verifier-option", "k=3"], "unknown option 'k'"),
    ("malformed --verifier-option", [QUERY, "--verifier", "grubbs", "--verifier-option", "alpha"], "--verifier-option"),
    ("verifier option out of range", [QUERY, "--verifier", "grubbs(alpha=-3)"], "alpha"),
    ("unknown search", [QUERY, "--search", "nope"], "unknown search 'nope'"),
    ("unknown utility", [QUERY, "--utility", "nope"], "unknown utility 'nope'"),
    ("unknown accounting", [QUERY, "--accounting", "nope"], "unknown accounting 'nope'"),
    # zscore(z=100) holds nowhere, so no start context can be valid.
    ("start not an outlier there", [QUERY, "--verifier", "zscore(z=100)", "--start", "year = '2018'"],
     "not an outlier in the start context"),
    ("start malformed", [QUERY, "--start", "job_title IN ("], "start context"),
    ("start without the record", [QUERY, "--start", "job_title = 'Teacher'"], "does not contain the record"),
    ("start names no attribute", [QUERY, "--start", "nosuch = 'x'"], "nosuch"),
    ("value outside a declared domain",
     [VARCHAR_QUERY, "--by", "job_title,year", "--domain", "job_title=Registered Nurse|Teacher"], "outside its declared domain"),
    ("malformed --domain", [QUERY, "--domain", "job_title"], "--domain"),
    ("malformed --by", [QUERY, "--by", "job_title,,year"], "--by"),
    ("unknown --by column", [QUERY, "--by", "nosuch"], "unknown column 'nosuch'"),
    ("context space too large for direct", [QUERY, "--search", "direct", "--max-contexts", "10"], "admissible contexts"),
    ("--max-contexts below 1", [QUERY, "--max-contexts", "0"], "--max-contexts"),
    ("several statements in the query", [QUERY + "; DROP TABLE salaries"], "2 statements"),
    ("unknown option", [QUERY, "--nope"], "no such option"),
    ("unknown format", [QUERY, "--format", "xml"], "--format"),
    ("non-numeric --samples", [QUERY, "--samples", "abc"], "--samples"),
]


@pytest.mark.parametrize("args, needle", [c[1:] for c in EXPLAIN_CASES], ids=[c[0] for c in EXPLAIN_CASES])
def test_explain_outlier_bad_input(args, needle, db):
    # A database file opens faster than the default in-memory load of every bundled dataset.
    extra = [] if "--verifier" in args else ["--verifier", "grubbs"]
    assert_error(invoke("explain-outlier", *args, *extra, "--seed", "1", "--allow-seeded", "--db", str(db)), needle)


def test_missing_database(tmp_path):
    assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(tmp_path / "nope.duckdb")), "does not exist")
    assert not (tmp_path / "nope.duckdb").exists()  # not created either
    assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(tmp_path)), "is not a file")
    (tmp_path / "junk.duckdb").write_text("not a database")
    assert_error(invoke("explain-outlier", QUERY, *FAST, "--db", str(tmp_path / "junk.duckdb")), "cannot open database")


def test_undeclared_domain_warns_and_still_works():
    result = invoke("explain-outlier", VARCHAR_QUERY, "--by", "job_title,year", *FAST)
    assert result.exit_code == 0, result.stderr
    assert_clean_stderr(result)
    assert "warning: job_title has no declared domain" in result.stderr
    assert "job_title ∈ {" in result.stdout


def _budget(db, unit="bundled:salaries"):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT spent_epsilon, releases FROM pcor.budget WHERE unit = ? AND notion = 'ocdp'", [unit]
        ).fetchall()[0]
    finally:
        con.close()


def test_budget_exceeded_is_refused_and_not_charged(db):
    assert invoke("budget", "set-limit", "salaries", "0.3", "--db", str(db)).exit_code == 0
    first = invoke("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.2")
    assert first.exit_code == 0, first.stderr
    assert "spent ε = 0.2 of limit 0.3" in first.stdout
    refused = invoke("explain-outlier", "SELECT salary FROM main.salaries s WHERE id = 42", *FAST, "--db", str(db),
                     "--epsilon", "0.2")
    assert_error(refused, "would exceed the ocdp privacy budget", "bundled:salaries")
    assert _budget(db) == (pytest.approx(0.2), 1)  # the refused release cost nothing
    assert invoke("explain-outlier", QUERY, *FAST, "--db", str(db), "--epsilon", "0.1").exit_code == 0
    assert _budget(db) == (pytest.approx(0.3), 2)


def test_read_only_database_refuses_releases_but_can_be_read(db):
    os.chmod(db, 0o444)
    try:
        refused = invoke("explain-outlier", QUERY, *FAST, "--db", str(db))
        assert_error(refused, "read-only", "budget ledger")
        status = invoke("budget", "status", "--db", str(db), "--format", "jsonl")
        assert status.exit_code == 0 and status.stdout == "", status.stderr
        owner = invoke("coe", QUERY, "--by", "job_title,year", "--verifier", "grubbs", "--limit", "1", "--db", str(db), "--format", "jsonl")
        assert owner.exit_code == 0, owner.stderr
    finally:
        os.chmod(db, 0o644)


def test_internal_errors_exit_1_without_traceback_unless_debug(monkeypatch):
    from pcor_sql.errors import InternalError

    def broken(*args, **kwargs):
        raise InternalError("an invariant failed")

    monkeypatch.setattr(pcor_sql.api, "explain_outliers", broken)
    assert_error(invoke("explain-outlier", QUERY, *FAST), "an invariant failed", code=1)

    def crash(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(pcor_sql.api, "explain_outliers", crash)
    assert_error(invoke("explain-outlier", QUERY, *FAST), "unexpected ZeroDivisionError: boom", "--debug", code=1)
    debug = invoke("--debug", "explain-outlier", QUERY, *FAST)
    assert debug.exit_code == 1 and "Traceback" in debug.stderr and "ZeroDivisionError" in debug.stderr


def test_debug_shows_the_traceback_of_a_user_error():
    result = invoke("--debug", "explain-outlier", "SELECT salary FROM no_such_table WHERE id = 42", *FAST)
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


INJECTION = "x'); DROP TABLE salaries; --"


def _quoted_for_domain(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def test_sql_injection_attempts_are_inert(db):
    """Values and identifiers that hold SQL reach DuckDB only as quoted data: each attempt either
    fails with a user error or releases a context — and the tables are still there."""
    job_titles = "|".join([*declared_domains("salaries")["job_title"], _quoted_for_domain(INJECTION)])
    attempts = [
        # A declared domain value holding SQL: released contexts may contain it, quoted.
        (["coe", QUERY, "--by", "job_title,year", "--verifier", "grubbs", "--domain", f"job_title={job_titles}", "--format", "jsonl"], 0),
        (["explain-outlier", QUERY, *FAST, "--by", "job_title,year", "--domain", f"job_title={job_titles}", "--format", "jsonl"], 0),
        # A start value holding SQL.
        (["explain-outlier", QUERY, *FAST, "--start", "job_title IN ('Registered Nurse', 'x''); DROP TABLE salaries; --')"], 2),
        # Identifiers holding SQL.
        (["explain-outlier", QUERY, *FAST, "--by", 'job_title,"year""; DROP TABLE salaries; --"'], 2),
        (["explain-outlier", f'SELECT "salary""; DROP TABLE salaries; --" FROM salaries WHERE id = 42', *FAST], 2),
        # Dataset and unit names holding SQL: looked up as data, not found.
        (["explain-outlier", QUERY, *FAST, "--dataset", "x'); DROP TABLE pcor.budget; --"], 2),
        (["budget", "set-limit", "x'); DROP TABLE salaries; --", "5"], 2),
        (["dataset", "add", "x'); DROP TABLE salaries; --", "salaries", "--key", "id", "--metric", "salary",
          "--by", "year"], 2),
        # A second statement after the selector.
        (["explain-outlier", QUERY + "; DROP TABLE salaries", *FAST], 2),
    ]
    outputs = []
    for args, code in attempts:
        result = invoke(*args, "--db", str(db))
        assert result.exit_code == code, (args, result.stderr)
        assert_clean_stderr(result)
        outputs.append(result.stdout)
    released = [line for line in outputs[0].splitlines() if INJECTION in line]
    assert released, "the injected value should appear, quoted, in some valid contexts"
    con = duckdb.connect(str(db))
    try:
        import json

        predicate = json.loads(released[0])["predicate"]
        assert "'x''); DROP TABLE salaries; --'" in predicate
        con.execute(f"SELECT count(*) FROM salaries WHERE {predicate}").fetchall()
        assert con.execute("SELECT count(*) FROM salaries").fetchall() == [(51000,)]
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert {"salaries", "budget", "history", "datasets"} <= names
        assert con.execute("SELECT count(*) FROM pcor.datasets").fetchall() == [(0,)]
    finally:
        con.close()
