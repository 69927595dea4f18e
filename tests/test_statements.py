"""`pcor_sql.statement_runner`: statements and scripts on a DuckDB connection."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql.api
from pcor_sql.api import Explanation
from pcor_sql.engine.datasets import load_dataset
from pcor_sql.errors import UserError
from pcor_sql.statement_runner import run_script, sql

EXPLAIN = "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs"


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    load_dataset(connection, "salaries")
    yield connection
    connection.close()


def test_explain_outlier_returns_explanations_with_the_statement_options(con):
    [e] = sql(con, EXPLAIN + " BY job_title, year WITH (epsilon = 0.4, search = 'dfs', samples = 6, seed = 3);")
    assert isinstance(e, Explanation)
    assert (e.epsilon, e.search, e.samples, e.seeded) == (0.4, "dfs", 6, True)
    assert set(e.context) == {"job_title", "year"} and e.verifier.startswith("grubbs")
    several = sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id IN (42, 171) USING grubbs", seed=1)
    assert [x.record["id"] for x in several] == [42, 171]


def test_defaults_apply_only_where_the_statement_is_silent(con):
    warnings: list[str] = []
    [a] = sql(con, EXPLAIN + " WITH (seed = 11)", seed=99, owner_view=True, warn=warnings.append)
    [b] = sql(con, EXPLAIN, seed=11, owner_view=True)
    [c] = sql(con, EXPLAIN + " WITH (seed = 11, owner_view = FALSE)", owner_view=True)
    assert a.context == b.context == c.context  # the statement's seed won over seed=99
    assert a.owner is not None and c.owner is None
    assert any("in memory" in w for w in warnings)
    [unseeded] = sql(con, EXPLAIN)
    assert unseeded.seeded is False


def test_ordinary_sql_passes_through_unchanged(con):
    rel = sql(con, "SELECT 40 + 2 AS answer;  -- a comment")
    assert isinstance(rel, duckdb.DuckDBPyRelation) and rel.fetchall() == [(42,)]
    sql(con, "CREATE OR REPLACE TABLE passthrough AS SELECT 1 AS a")
    assert con.execute("SELECT a FROM passthrough").fetchall() == [(1,)]
    with pytest.raises(duckdb.Error):  # a lone ordinary statement fails as DuckDB's own error
        sql(con, "SELEC 1")
    assert sql(con, "  -- nothing but a comment\n") is None


def test_a_script_runs_in_order_and_returns_the_last_result(con):
    script = (
        "CREATE OR REPLACE TABLE t AS SELECT 1 AS n;\n"
        "INSERT INTO t VALUES (2);\n"
        + EXPLAIN + " WITH (seed = 1);\n"
        "SELECT sum(n) FROM t"
    )
    assert sql(con, script).fetchall() == [(3,)]
    steps = list(run_script(con, script.replace("INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (5)")))
    assert [(s.index, s.line, s.kind) for s in steps] == [(1, 1, "sql"), (2, 2, "sql"), (3, 3, "explain"), (4, 4, "sql")]
    assert [type(s.statement).__name__ for s in steps] == ["Passthrough", "Passthrough", "ExplainOutlier", "Passthrough"]
    assert isinstance(steps[2].value[0], Explanation)
    assert steps[3].text == "SELECT sum(n) FROM t" and steps[3].value.fetchall() == [(6,)]


def test_a_script_stops_at_the_first_error_and_names_it(con):
    script = "CREATE OR REPLACE TABLE u AS SELECT 1 AS n;\n\nSELEC 2;\nCREATE OR REPLACE TABLE v AS SELECT 1 AS n"
    with pytest.raises(UserError, match=r"^statement 2 \(line 3\): .*syntax error"):
        sql(con, script)
    assert con.execute("SELECT count(*) FROM u").fetchall() == [(1,)]
    assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'v'").fetchall()
    with pytest.raises(UserError, match=r"^statement 2 \(line 2\): unknown option 'epsilonn'"):
        sql(con, "SELECT 1;\n" + EXPLAIN + " WITH (epsilonn = 1)")
    with pytest.raises(UserError, match="selects no row"):
        sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = -1 USING grubbs")


def test_identify_anomaly_becomes_a_request_with_the_defaults(con, monkeypatch):
    calls = []

    def fake(session, request, **kwargs):
        calls.append((session, request))
        return ["answer"]

    monkeypatch.setattr(pcor_sql.Session, "identify", fake)
    text = "IDENTIFY ANOMALY SELECT salary FROM salaries WITH (beta = 5, radius = 1000, epsilon = 0.5, k = 2)"
    assert sql(con, text, seed=4) == ["answer"]
    session, request = calls[0]
    assert session.con is con
    assert isinstance(request, pcor_sql.AnomalyRequest)
    assert (request.relation, request.columns, request.selector, request.statement) == (
        "salaries", ("salary",), None, "SELECT salary FROM salaries"
    )
    assert (request.beta, request.radius, request.epsilon, request.k, request.seed, request.owner_view) == (
        5.0, 1000.0, 0.5, 2, 4, False
    )


def test_the_domain_clause_means_what_the_domains_option_means(con):
    titles = [r[0] for r in con.execute("SELECT DISTINCT job_title::VARCHAR FROM salaries ORDER BY 1").fetchall()]
    declared = {"job_title": [*titles, "Astronaut"], "year": list(range(2010, 2021))}
    listed = ", ".join("'" + t.replace("'", "''") + "'" for t in declared["job_title"])
    years = ", ".join(str(y) for y in declared["year"])
    [stated] = sql(
        con,
        "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 BY job_title, year "
        f"DOMAIN (job_title IN ({listed}), year IN ({years})) USING grubbs WITH (seed = 5, search = 'dfs', samples = 8)",
    )
    option = pcor_sql.api.explain_outlier(
        con, "SELECT salary FROM salaries WHERE id = 42", by="job_title,year", domains=declared, verifier="grubbs",
        seed=5, search="dfs", samples=8,
    )
    assert stated.context == option.context
    # A domain that misses a value in the data is refused, as with the option.
    with pytest.raises(UserError, match="outside its declared domain"):
        sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 BY job_title DOMAIN (job_title IN ('Teacher'))")
