"""The Spark engine against the embedded one: the same Parquet data with the same declared
domains gives the same COE, the same seeded releases and the same anomaly answers; only
summaries, windows and per-record counts come back; units name catalog tables and files.

One local SparkSession (local[2]) serves the whole module, on a few thousand rows, so the
module stays within about a minute on a shared 2-core machine. Skipped, with a warning that
names the extra, only where pyspark or Java is missing.
"""

from __future__ import annotations

import json
import shutil
import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.backends.spark_session import INSTALL_FIX, java_home_ok
from pcor_sql.backends.spark_units import Unit
from pcor_sql.engine.window import START_DEPTH
from pcor_sql.errors import UserError
from pcor_sql.sqltext.dialect import spark_sql


def _why_no_spark() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return f"Spark tests need pyspark: {INSTALL_FIX}"
    if not (java_home_ok() or shutil.which("java")):
        return f"Spark tests need Java: {INSTALL_FIX}"
    return None


MISSING = _why_no_spark()
if MISSING:
    warnings.warn(f"SKIPPING THE SPARK TESTS — {MISSING}", stacklevel=1)
    pytest.skip(MISSING, allow_module_level=True)

DOMAINS = {"dept": ["a", "b", "c", "d"], "role": ["x", "y", "z"]}  # dept d: declared, absent
# 2,400 rows: salary ~ 50 ± noise by cell, with ties (rounded to 0.5); a few planted highs.
# x, y: tie-heavy small integers; x is far out on every 194th row (anomalies among id % 97 = 0).
DATA_SQL = """
SELECT i AS id,
       ['a', 'b', 'c'][1 + i % 3] AS dept,
       ['x', 'y', 'z'][1 + (i // 3) % 3] AS role,
       CASE WHEN i IN (7, 500, 1001) THEN 400.0 + i % 7
            ELSE round(2 * (40 + 5 * (i % 3) + 10 * ((hash(i) % 1000) / 1000.0))) / 2 END AS salary,
       CASE WHEN i % 194 = 0 THEN 1000 + i ELSE (hash(i * 7) % 50)::INTEGER END AS x,
       (hash(i * 13) % 40)::INTEGER AS y
FROM range(2400) t(i)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("spark") / "emp.parquet"
    duckdb.connect().execute(f"COPY ({DATA_SQL}) TO '{path}' (FORMAT parquet)")
    return str(path)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]").appName("pcor-sql-tests")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        # Small data on a shared machine: a quick JIT and interpreted plans start faster.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.codegen.wholeStage", "false").config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def engines(spark, data):
    """A Session per engine on the same file: summaries are cached across the tests."""
    return pcor_sql.Session(duckdb.connect()), pcor_sql.Session(spark), f"read_parquet('{data}')", f"parquet.`{data}`"


def _pair(engines, call, selector, **options):
    duck, sparks, d_rel, s_rel = engines
    a = call(None, f"SELECT salary FROM {d_rel} WHERE {selector}", session=duck, **options)
    b = call(None, f"SELECT salary FROM {s_rel} WHERE {selector}", session=sparks, **options)
    return a, b


@pytest.mark.parametrize("verifier", ["grubbs", "lof(k=5)", "histogram(rel=0.01)"])
def test_seeded_releases_and_coe_are_the_same_on_both_engines(engines, verifier):
    opts = dict(domains=DOMAINS, verifier=verifier)
    a, b = _pair(engines, pcor_sql.explain_outliers, "id IN (7, 500)", epsilon=0.5, seed=7, **opts)
    assert len(a) == len(b) == 2
    for x, y in zip(a, b):
        assert (x.record, x.context, x.em_calls, x.start_source) == (y.record, y.context, y.em_calls, y.start_source)
        assert y.predicate == spark_sql(x.predicate)  # the same context, in Spark's quoting
    [ca], [cb] = _pair(engines, pcor_sql.coe, "id = 7", **opts)
    assert ca.size == cb.size > 0 and ca.admissible == cb.admissible
    assert [(c.context, c.utility) for c in ca.ranked(None)] == [(c.context, c.utility) for c in cb.ranked(None)]


def test_only_summaries_and_windows_leave_the_cluster(engines):
    _, sparks, _, s_rel = engines
    query = f"SELECT salary FROM {s_rel} WHERE id = 1234"  # a value no other test fetched windows for
    run = sparks.prepare(pcor_sql.outlier_request(sparks.access.parser, query, domains=DOMAINS, verifier="lof(k=5)"))
    cells, reader, access = len(run.summary.count), run.summary.windows, sparks.access
    assert cells == 9
    before, read_before = access.rows_pulled, reader.rows_read
    oracle, space = run.oracle(0), run.space(0)
    verdicts = [oracle.is_valid(space.from_free(w)) for w in range(space.n_admissible)]
    assert len(verdicts) == 32
    # Every context's LOF check was answered from the record's per-cell windows: at most
    # 2·depth + 1 values per cell (deepened only if a check needs more), far fewer than 2,400 rows.
    windows = reader.rows_read - read_before
    assert access.rows_pulled - before == windows
    assert 0 < windows <= cells * (2 * START_DEPTH + 1) * 5 and windows < 2400


def test_two_scan_windows_equal_the_one_query_on_spark(engines):
    """On Spark, the two-scan window read gives the one-query rows, on tie-heavy columns (x: 50
    small integers; salary: halves) and at V's own value (its copies)."""
    from pcor_sql.backends.spark_windows import two_scan_windows
    from pcor_sql.sqltext.build import cell_windows

    access, rel = engines[1].access, engines[3]
    for metric, v, depth in (("x", 7.0, 4), ("x", 1000.0, 3), ("salary", 50.0, 6), ("salary", 401.0, 2)):
        for where in (None, "dept = 'b'"):
            old = access.arrow(cell_windows(["dept", "role"], metric, rel, v, depth, where))
            listed = None if where is None else [("b", "x"), ("b", "y"), ("b", "z")]  # the same cells, as a list
            for w, cells in ((where, None), (None, listed)):
                new, _, _ = two_scan_windows(access.arrow, ["dept", "role"], metric, rel, v, depth, w, cells)
                rows = [sorted((*r[:-2], min(r[-2], depth + 1), r[-1]) for r in zip(*(c.to_pylist() for c in t.columns)))
                        for t in (old, new)]
                assert rows[0] == rows[1] and rows[0], (metric, v, depth, where, cells)


@pytest.mark.parametrize("columns,norm,radius", [("x", "l2", 2), ("x, y", "l2", 3.5)])
def test_anomaly_answers_are_the_same_on_both_engines(engines, columns, norm, radius):
    duck, sparks, d_rel, s_rel = engines
    opts = dict(beta=3, radius=radius, norm=norm, epsilon=0.5, seed=7, owner_view=True)
    a = pcor_sql.identify_anomalies(None, f"SELECT {columns} FROM {d_rel} WHERE id % 97 = 0", session=duck, **opts)
    b = pcor_sql.identify_anomalies(None, f"SELECT {columns} FROM {s_rel} WHERE id % 97 = 0", session=sparks, **opts)
    assert len(a) == len(b) == 25
    assert [(r.record, r.anomaly, r.owner["ball_count"], r.owner["multiplicity"]) for r in a] == \
           [(r.record, r.anomaly, r.owner["ball_count"], r.owner["multiplicity"]) for r in b]
    assert any(r.owner["true_answer"] for r in a) and not all(r.owner["true_answer"] for r in a)


@pytest.mark.parametrize("columns,norm,radius", [(("x",), "l2", 2.0), (("x", "y"), "l1", 3.5), (("x", "y"), "linf", 0.0)])
def test_point_counts_are_the_same_on_both_engines(engines, columns, norm, radius):
    """IDENTIFY ANOMALY VALUE: a point in the data, one between values, one far away."""
    duck, sparks, d_rel, s_rel = engines
    for point in ([1194.0, 5.0][:len(columns)], [10.5, 3.0][:len(columns)], [-1e6, 0.0][:len(columns)]):
        a = duck.access.point_counts(d_rel, columns, point, radius, norm)
        b = sparks.access.point_counts(s_rel, columns, point, radius, norm)
        assert (a.multiplicity.tolist(), a.ball.tolist()) == (b.multiplicity.tolist(), b.ball.tolist()), point


def test_units_are_catalog_identifiers_and_file_paths(spark, engines, data):
    access = engines[1].access
    spark.read.parquet(data).write.mode("overwrite").saveAsTable("emp_table")
    spark.sql("CREATE OR REPLACE VIEW emp_view AS SELECT * FROM emp_table WHERE id > 3")
    spark.createDataFrame([(1, 2.0)], "id INT, v DOUBLE").createOrReplaceTempView("local_rows")
    table = Unit("spark_catalog.default.emp_table", "table")
    assert access.units("emp_table") == (table,)
    assert access.units("spark_catalog.default.emp_view AS v") == (table,)
    assert access.units(f"parquet.`{data}`") == (Unit(f"file:{data}", "file"),)
    assert [u.name for u in access.units("local_rows")] == ["object:local_rows"]
    joined = access.units(f"emp_table JOIN parquet.`{data}` AS p USING (id)")
    assert [u.kind for u in joined] == ["file", "table"]
    # A whole statement: what the select list and WHERE read is charged like the relation.
    spark.read.parquet(data).createOrReplaceTempView("emp_files")
    statement = "SELECT (SELECT max(v) FROM local_rows) AS m FROM emp_view WHERE id IN (SELECT id FROM emp_files)"
    assert access.units(statement) == tuple(sorted({table, Unit(f"file:{data}", "file"), Unit("object:local_rows", "object")}))
    assert access.units("SELECT id FROM emp_table WHERE id = 1") == access.units("emp_table")
    with pytest.raises(UserError, match="no table or file"):
        access.units("range(10)")


def test_bad_input_is_one_line(engines):
    _, sparks, _, s_rel = engines
    with pytest.raises(UserError, match="TABLE_OR_VIEW_NOT_FOUND") as err:
        pcor_sql.explain_outlier(None, "SELECT salary FROM no_such_table WHERE id = 1", session=sparks, domains=DOMAINS)
    # The unit resolver (run first, before any charge) is the one to meet the unknown relation.
    assert "\n" not in str(err.value) and "name a Spark table" in str(err.value)
    registry = pcor_sql.default_registry()
    registry.register_python("far", lambda values, v: abs(v - values.mean()) > 3 * values.std())
    with pytest.raises(UserError, match="reads all values of each context, which the spark engine does not serve"):
        pcor_sql.explain_outlier(None, f"SELECT salary FROM {s_rel} WHERE id = 7",
                                 session=pcor_sql.Session(sparks.con, registry=registry), domains=DOMAINS, verifier="far")
    with pytest.raises(UserError, match="DuckDB connection"):
        pcor_sql.sql(sparks.con, "SELECT 1")
    # The module functions take the SparkSession itself; `*` is expanded by Spark's analyzer.
    with pytest.raises(UserError, match="TABLE_OR_VIEW_NOT_FOUND"):
        pcor_sql.identify_anomaly(sparks.con, "SELECT x FROM no_such_table WHERE id = 1", beta=3, radius=1, epsilon=1)
    with pytest.raises(UserError, match="'dept' has type VARCHAR, not a number"):
        pcor_sql.identify_anomalies(sparks.con, f"SELECT * FROM {s_rel}", beta=3, radius=1, epsilon=1)


def test_the_cli_runs_on_spark(spark, data, tmp_path):
    from typer.testing import CliRunner

    from pcor_sql.cli.main import app

    ledger = tmp_path / "ledger.duckdb"
    args = ["explain-outlier", "--by", "dept,role", "--domain", "dept=a|b|c|d", "--domain", "role=x|y|z",
            "--verifier", "grubbs", "--seed", "7", "--format", "jsonl", "--ledger", str(ledger)]
    spark_args = ["--engine", "spark", "--spark-master", "local[2]"]
    # A seed on a persistent ledger is refused on Spark as on DuckDB, before anything is charged.
    refused = CliRunner().invoke(app, [*args, f"SELECT salary FROM parquet.`{data}` WHERE id = 7", *spark_args])
    assert refused.exit_code != 0 and "seeded runs are refused" in refused.stderr, refused.stderr
    args.append("--allow-seeded")
    duck = CliRunner().invoke(app, [*args, f"SELECT salary FROM read_parquet('{data}') WHERE id = 7"])
    out = CliRunner().invoke(app, [*args, f"SELECT salary FROM parquet.`{data}` WHERE id = 7", *spark_args])
    assert out.exit_code == 0 == duck.exit_code, out.stderr
    assert json.loads(out.stdout)["context"] == json.loads(duck.stdout)["context"]
    assert json.loads(out.stdout)["units"] == json.loads(duck.stdout)["units"] == [f"file:{data}"]
    con = duckdb.connect(str(ledger))
    # Both engines name the file the same unit, so both releases are charged to one account.
    assert pcor_sql.Ledger(con).status(f"file:{data}").spent == pytest.approx(0.4)
    con.close()
    # --db names a DuckDB database: with --engine spark it is refused (the ledger is --ledger).
    db = CliRunner().invoke(app, [*args[:-3], f"SELECT salary FROM parquet.`{data}` WHERE id = 7", *spark_args,
                                  "--db", str(ledger)])
    assert db.exit_code == 2 and "--engine spark" in db.stderr and "--ledger" in db.stderr, db.stderr


def test_the_spark_ledger_is_a_file_never_memory_unasked(spark, data, tmp_path, monkeypatch):
    query = f"SELECT salary FROM parquet.`{data}` WHERE id = 7"
    given = tmp_path / "given.duckdb"
    session = pcor_sql.Session(spark, ledger=str(given))
    pcor_sql.explain_outlier(None, query, session=session, domains=DOMAINS, verifier="grubbs", epsilon=0.1)
    assert session.ledger().path == str(given) and session.ledger().status(f"file:{data}").spent == pytest.approx(0.1)
    session.ledger().close()
    monkeypatch.setenv("PCOR_SQL_LEDGER", str(tmp_path / "env.duckdb"))
    from_env = pcor_sql.Session(spark).ledger()
    assert from_env.path == str(tmp_path / "env.duckdb")
    from_env.close()
    monkeypatch.delenv("PCOR_SQL_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    per_user = pcor_sql.Session(spark).ledger()
    assert per_user.path == str(tmp_path / "xdg" / "pcor-sql" / "ledger.duckdb") and per_user.persistent
    per_user.close()
    # In memory only when asked for, and then with the warning; one per SparkSession.
    with pytest.warns(pcor_sql.PrivacyWarning, match="in memory"):
        memory = pcor_sql.Session(spark, ledger=":memory:").ledger()
    assert memory.in_memory


def test_owner_and_analyst_on_spark(spark, data, tmp_path):
    """The owner registers a Spark relation; the analyst's releases are charged to the file's
    unit in the DuckDB ledger before any row is read, and a spent budget is refused with the
    same text whatever the data."""
    owner = pcor_sql.Owner(spark, ledger=str(tmp_path / "owner.duckdb"))
    ds = owner.register("emp", f"parquet.`{data}`", key="id", metric="salary", by="dept,role",
                        domains=DOMAINS, limit=0.5, releasable=[7, 500, 1001, 99999])
    assert ds.units == (f"file:{data}",)
    assert dict(ds.domains)["dept"] == ("a", "b", "c", "d")  # frozen as declared, absent d kept
    analyst = owner.analyst()
    first = analyst.explain_outlier("emp", 7, epsilon=0.2, verifier="grubbs")
    assert first.context and first.epsilon == pytest.approx(0.2)
    assert owner.spent(f"parquet.`{data}`") == pytest.approx(0.2)
    analyst.explain_outlier("emp", 500, epsilon=0.2, verifier="grubbs")
    with pytest.raises(pcor_sql.BudgetExceeded):
        analyst.explain_outlier("emp", 1001, epsilon=0.2, verifier="grubbs")
    assert owner.spent("emp") == pytest.approx(0.4)
    # A key with no record costs its reservation and fails with the generic message.
    with pytest.raises(pcor_sql.RequestFailed) as err:
        analyst.explain_outlier("emp", 99999, epsilon=0.1, verifier="grubbs")
    assert "99999" not in str(err.value)
    assert owner.spent("emp") == pytest.approx(0.5)
    owner.ledger.close()


def test_a_verifier_spark_cannot_serve_is_refused_before_any_charge(spark, data, tmp_path):
    """A Python verifier reads every value of a context, which Spark does not serve: the owner
    and the analyst are refused with the fix before the reservation, so nothing is charged and
    the history holds nothing (it used to fail at the first check, the analyst's ε kept)."""
    registry = pcor_sql.default_registry()
    registry.register_python("far", lambda values, v: abs(v - values.mean()) > 3 * values.std())
    owner = pcor_sql.Owner(spark, ledger=str(tmp_path / "owner.duckdb"), registry=registry)
    owner.register("emp", f"parquet.`{data}`", key="id", metric="salary", by="dept,role", domains=DOMAINS,
                   limit=1.0, releasable=[7])
    analyst = owner.analyst()
    for ask in (lambda: analyst.explain_outlier("emp", 7, epsilon=0.2, verifier="far"),
                lambda: analyst.cost("explain_outliers", "emp", [7], epsilon=0.2, verifier="far"),
                lambda: pcor_sql.explain_outlier(None, f"SELECT salary FROM parquet.`{data}` WHERE id = 7",
                                                 session=owner.session, domains=DOMAINS, verifier="far")):
        with pytest.raises(UserError, match="verifier 'far' reads all values") as err:
            ask()
        assert "grubbs, histogram, lof or zscore" in str(err.value.fix)
    assert owner.spent("emp") == 0.0 and owner.ledger.history() == ()
    owner.ledger.close()
