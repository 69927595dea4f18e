"""The Python API on the bundled data: what a release holds, what it charges, what it refuses."""

import duckdb
import pytest

import pcor_sql
from pcor_sql.ledger.store import Ledger

Q = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    pcor_sql.load_datasets(c)
    yield c
    c.close()


@pytest.mark.parametrize("search", ["direct", "uniform", "random-walk", "dfs", "bfs", "explore"])
def test_release_holds_context_and_parameters_only(con, search):
    r = pcor_sql.explain_outlier(con, Q, search=search, verifier="grubbs", seed=3, samples=20)
    assert r.search == search and r.samples == 20 and r.seeded and r.owner is None
    assert set(r.context) == {"job_title", "employer", "year"}
    assert r.context["job_title"] and "Registered Nurse" in r.context["job_title"]
    assert r.explanation_sql == f"SELECT salary FROM salaries WHERE {r.predicate}"
    assert r.epsilon == 0.2
    expected_eps1 = 0.2 / 21 if search in ("dfs", "bfs") else 0.2
    assert r.epsilon1 == pytest.approx(expected_eps1)
    assert 1 <= r.em_calls <= (21 if search in ("dfs", "bfs") else 1)
    assert r.descents == (24 if search == "bfs" else 0)
    d = r.as_dict()
    assert set(d) == {"record", "context", "predicate", "explanation_sql", "epsilon", "epsilon1", "accounting", "search",
                      "samples", "descents", "em_calls", "verifier", "utility", "start_source", "seeded", "dataset", "units",
                      "warning", "summary", "privacy_summary", "metric", "selector"}
    assert d["summary"].startswith("salary of the record where id = 42 is an outlier (Grubbs' test, alpha = 0.05)")
    # The explanation query runs, and the record is in the population it selects.
    assert 187190.79 in [row[0] for row in con.execute(r.explanation_sql).fetchall()]


def test_owner_view_is_marked_not_for_release(con):
    r = pcor_sql.explain_outlier(con, Q, verifier="grubbs", seed=1, owner_view=True)
    d = r.as_dict()["owner"]
    assert d["not_for_release"] is True and d["population"] >= 1 and d["em_calls"] == r.em_calls


def test_seeded_runs_repeat_and_unseeded_are_labelled_secure(con):
    a = pcor_sql.explain_outlier(con, Q, verifier="grubbs", seed=11)
    b = pcor_sql.explain_outlier(con, Q, verifier="grubbs", seed=11)
    assert a.context == b.context
    c = pcor_sql.explain_outlier(con, Q, verifier="grubbs")
    assert c.seeded is False and "warning" not in c.as_dict()


def test_several_rows_give_one_release_each_all_charged(tmp_path):
    db = duckdb.connect(str(tmp_path / "x.duckdb"))
    pcor_sql.load_dataset(db, "salaries")
    out = pcor_sql.explain_outliers(db, "SELECT salary FROM salaries WHERE id IN (42, 171)", verifier="grubbs", seed=2,
                                    allow_seeded=True)
    assert isinstance(out, list) and len(out) == 2
    assert {r.record["id"] for r in out} == {42, 171}
    assert Ledger(db).status("bundled:salaries").spent == pytest.approx(0.4)
    db.close()


def test_explain_outlier_on_several_rows_names_explain_outliers_and_charges_nothing(tmp_path):
    db = duckdb.connect(str(tmp_path / "x.duckdb"))
    pcor_sql.load_dataset(db, "salaries")
    with pytest.raises(pcor_sql.UserError, match="explain_outliers"):
        pcor_sql.explain_outlier(db, "SELECT salary FROM salaries WHERE id IN (42, 171)", verifier="grubbs")
    assert Ledger(db).status("bundled:salaries").spent == 0
    one = pcor_sql.explain_outlier(db, Q, verifier="grubbs")
    assert isinstance(one, pcor_sql.Explanation)
    db.close()


def test_limit_refuses_and_charges_nothing(tmp_path):
    db = duckdb.connect(str(tmp_path / "y.duckdb"))
    pcor_sql.load_dataset(db, "salaries")
    ledger = Ledger(db)
    ledger.set_limit("bundled:salaries", 0.3)
    r = pcor_sql.explain_outlier(db, Q, verifier="grubbs")
    assert (r.budget_spent, r.budget_limit) == (pytest.approx(0.2), 0.3)
    with pytest.raises(pcor_sql.BudgetExceeded):
        pcor_sql.explain_outlier(db, Q, verifier="grubbs")
    assert ledger.status("bundled:salaries").spent == pytest.approx(0.2)
    assert len(ledger.history("bundled:salaries")) == 1
    db.close()


def test_user_start_and_overlap_utility(con):
    start = "job_title = 'Registered Nurse' AND employer = 'University Health Network' AND year = '2018'"
    r = pcor_sql.explain_outlier(con, Q, verifier="grubbs", seed=4, start=start, utility="overlap", search="bfs")
    assert r.start_source == "user" and r.utility == "overlap"
    with pytest.raises(pcor_sql.UserError, match="does not contain the record"):
        pcor_sql.explain_outlier(con, Q, verifier="grubbs", start="job_title = 'Teacher'")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(samples=0), "samples"),
        (dict(search="astar"), "unknown search"),
        (dict(utility="fame"), "unknown utility"),
        (dict(accounting="loose"), "unknown accounting"),
        (dict(verifier="magic"), "unknown verifier"),
        (dict(verifier="lof", verifier_options={"q": 1}), "unknown option"),
        (dict(search="direct", max_contexts=1000), "admissible contexts"),
    ],
)
def test_bad_arguments_are_user_errors(con, kwargs, match):
    with pytest.raises(pcor_sql.UserError, match=match):
        pcor_sql.explain_outlier(con, Q, **{"verifier": "grubbs", **kwargs})


def test_no_row_and_no_where_are_user_errors(con):
    with pytest.raises(pcor_sql.UserError, match="selects no row"):
        pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = -1")
    with pytest.raises(pcor_sql.UserError, match="no WHERE"):
        pcor_sql.explain_outlier(con, "SELECT salary FROM salaries")


def test_coe_is_the_owner_enumeration(con):
    res = pcor_sql.coe(con, Q, verifier="grubbs")[0]
    assert res.admissible == 2**22 and 0 < res.size < res.admissible
    best = res.best()
    assert best.utility == res.max_utility
    n = con.execute(f"SELECT count(*) FROM salaries WHERE {best.predicate}").fetchall()[0][0]
    assert n == best.utility


def test_identify_anomaly_batch_and_owner_fields(con):
    out = pcor_sql.identify_anomalies(con, "SELECT salary FROM salaries WHERE id IN (42, 43)", beta=5, radius=1000, epsilon=0.5, seed=1, owner_view=True)
    assert [a.record["id"] for a in out] == [42, 43]
    for a in out:
        d = a.as_dict()
        assert isinstance(d["anomaly"], bool) and d["privacy"] == "sp" and d["k"] == 1
        assert set(d["owner"]) >= {"true_answer", "ball_count", "multiplicity", "lambda", "flip_probability"}
    plain = pcor_sql.identify_anomaly(con, "SELECT salary FROM salaries WHERE id = 42", beta=5, radius=1000, epsilon=0.5, seed=1)
    assert isinstance(plain, pcor_sql.AnomalyResult) and "owner" not in plain.as_dict()
    with pytest.raises(pcor_sql.UserError, match="identify_anomalies"):
        pcor_sql.identify_anomaly(con, "SELECT salary FROM salaries WHERE id IN (42, 43)", beta=5, radius=1000, epsilon=0.5)


def test_statement_runner_passes_ordinary_sql_through(con):
    rel = pcor_sql.sql(con, "SELECT count(*) AS n FROM salaries")
    assert rel.fetchall() == [(51000,)]
    res = pcor_sql.sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs WITH (seed = 5, search = 'dfs')")
    assert res[0].search == "dfs" and res[0].verifier.startswith("grubbs")


def test_descents_zero_is_the_papers_bfs_and_negative_is_refused(con):
    r = pcor_sql.explain_outlier(con, Q, verifier="grubbs", seed=3, descents=0)
    assert r.descents == 0 and r.as_dict()["descents"] == 0
    with pytest.raises(pcor_sql.UserError, match="descents"):
        pcor_sql.explain_outlier(con, Q, verifier="grubbs", descents=-1)


def test_python_takes_the_same_spec_strings_as_the_cli(con):
    r = pcor_sql.explain_outlier(con, Q, verifier="grubbs(alpha = 0.01)", by="job_title,year", seed=4)
    assert r.verifier == "grubbs(alpha=0.01)" and set(r.context) <= {"job_title", "year"}
    same = pcor_sql.explain_outlier(con, Q, verifier="grubbs", verifier_options={"alpha": 0.01}, by=["job_title", "year"],
                                    seed=4)
    assert same.context == r.context
    with pytest.raises(pcor_sql.UserError, match="twice"):
        pcor_sql.explain_outlier(con, Q, verifier="grubbs(alpha=0.01)", verifier_options={"alpha": 0.05})
    with pytest.raises(pcor_sql.UserError, match="unknown option 'epsilonn'"):
        pcor_sql.explain_outlier(con, Q, epsilonn=0.2)


@pytest.mark.parametrize("bad", ["salaries.duckdb", None, 3])
def test_a_non_connection_is_a_user_error_everywhere(bad):
    calls = {
        "explain_outlier": lambda: pcor_sql.explain_outlier(bad, Q),
        "coe": lambda: pcor_sql.coe(bad, Q),
        "identify_anomaly": lambda: pcor_sql.identify_anomaly(bad, Q, beta=1, radius=1, epsilon=1),
        "sql": lambda: pcor_sql.sql(bad, "EXPLAIN OUTLIER " + Q),
        "outlier_request": lambda: pcor_sql.outlier_request(bad, Q),
        "anomaly_request": lambda: pcor_sql.anomaly_request(bad, Q, beta=1, radius=1, epsilon=1),
        "load_datasets": lambda: pcor_sql.load_datasets(bad),
        "load_dataset": lambda: pcor_sql.load_dataset(bad, "salaries"),
        "Session": lambda: pcor_sql.Session(bad),
    }
    for name, call in calls.items():
        with pytest.raises(pcor_sql.UserError, match="DuckDB connection"):
            call()


def test_a_closed_connection_is_a_user_error():
    c = duckdb.connect()
    c.close()
    with pytest.raises(pcor_sql.UserError, match="connection"):
        pcor_sql.explain_outlier(c, Q)


def test_dir_lists_the_public_api_and_not_helper_imports():
    public = [name for name in dir(pcor_sql) if not name.startswith("_")]
    assert public == sorted(pcor_sql.__all__)
    assert {"explain_outlier", "Session", "UserError"} <= set(public)
    assert "importlib" not in dir(pcor_sql) and "Any" not in dir(pcor_sql)


def test_a_dataframe_named_in_from_is_found_in_the_callers_scope():
    import pyarrow as pa

    df = pa.table({"id": [1, 2, 3, 4, 5, 6], "v": [1.0, 1.1, 0.9, 1.05, 0.95, 50.0], "g": ["a", "b", "a", "a", "b", "a"]})
    c = duckdb.connect()
    seen: list[str] = []
    for call in (
        lambda: pcor_sql.explain_outlier(c, "SELECT v FROM df WHERE id = 6", by="g", verifier="zscore(z=1)",
                                         seed=1, warn=seen.append),
        lambda: pcor_sql.identify_anomaly(c, "SELECT v FROM df WHERE id = 6", beta=1, radius=1, epsilon=1,
                                          seed=1, warn=seen.append),
        lambda: pcor_sql.sql(c, "EXPLAIN OUTLIER SELECT v FROM df WHERE id = 6 BY g USING zscore(z=1)",
                             seed=1, warn=seen.append),
    ):
        result = call()
        result = result[0] if isinstance(result, list) else result
        units = result.units if hasattr(result, "units") else result.charge.units
        assert units == ("object:temp.main.df",)
    assert sum("caller's scope" in m for m in seen) == 3
    assert len(df) == 6  # the frame's df is what was read


def test_a_table_named_in_from_that_is_nowhere_gets_the_register_hint():
    c = duckdb.connect()
    for call in (
        lambda: pcor_sql.explain_outlier(c, "SELECT v FROM nodf WHERE id = 4", by="g"),
        lambda: pcor_sql.identify_anomaly(c, "SELECT v FROM nodf WHERE id = 4", beta=1, radius=1, epsilon=1),
        lambda: pcor_sql.sql(c, "EXPLAIN OUTLIER SELECT v FROM nodf WHERE id = 4 BY g"),
    ):
        with pytest.raises(pcor_sql.UserError, match=r"con\.register\('nodf', nodf\)"):
            call()
