"""Schema resolution: one DESCRIBE types the relation and the metric, ENUM domains come from the
type text, and failures name the part that is wrong."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.engine.datasets import load_dataset
from pcor_sql.engine.schema import _describe, enum_labels, metric_type, resolve_schema
from pcor_sql.errors import UserError
from pcor_sql.sqltext.quoting import quote_literal
from tests.engine.query_log import statements_run


def test_all_enum_relation_resolves_in_one_statement():
    con = duckdb.connect()
    load_dataset(con, "salaries")
    schema, statements = statements_run(con, lambda: resolve_schema(con, "salaries", '"salary"'))
    assert len(statements) == 1, statements
    assert statements[0].startswith("DESCRIBE ")
    assert schema.names == ("job_title", "employer", "year")
    for attr in schema.attributes:
        labels = con.execute(f"SELECT enum_range({attr.name}) FROM salaries LIMIT 1").fetchall()[0][0]
        assert list(attr.domain) == labels
    assert schema.not_null == frozenset({"id", "job_title", "employer", "year", "salary"})


def test_data_derived_domain_adds_only_its_distinct_query():
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a', 'b')")
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a'::k, 'x', 1.0), ('b'::k, 'y', 2.0)) v(g, h, m)")
    schema, statements = statements_run(con, lambda: resolve_schema(con, "t", "m", by=["g", "h"]))
    assert len(statements) == 2 and "DISTINCT" in statements[1]
    assert [a.domain for a in schema.attributes] == [("a", "b"), ("x", "y")]


def test_every_data_derived_domain_comes_from_one_scan():
    """Issue 28: a fixed cost of a release was one query per undeclared attribute; now one for
    all, with the same values in the same order (NULLs left out) as column by column."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i % 5 = 0 THEN NULL ELSE 'c' || (i % 7) END AS a, "
                "(i % 3)::INTEGER AS b, ['x', 'y'][1 + i % 2] AS c, i::DOUBLE AS m FROM range(50) r(i)")
    schema, statements = statements_run(con, lambda: resolve_schema(con, "t", "m", by=["a", "b", "c"]))
    assert len(statements) == 2 and "DISTINCT" in statements[1], statements
    for name, attr in zip("abc", schema.attributes):
        alone = [r[0] for r in con.execute(f"SELECT DISTINCT {name} FROM t WHERE {name} IS NOT NULL ORDER BY {name}").fetchall()]
        assert list(attr.domain) == alone
    with pytest.raises(UserError, match="the table is empty"):
        resolve_schema(con, "(SELECT * FROM t WHERE false)", "m", by=["a", "b"])
    con.execute("UPDATE t SET b = NULL")
    with pytest.raises(UserError, match="b has no non-NULL value"):
        resolve_schema(con, "t", "m", by=["a", "b"])


@pytest.fixture(scope="module")
def enum_con():
    """One connection for every example (a connection costs ~50 ms, an example a few)."""
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12).filter(lambda s: "\x00" not in s), min_size=1, max_size=6, unique=True))
def test_enum_labels_read_from_the_type_text_match_enum_range(enum_con, labels):
    con = enum_con
    con.execute("DROP TABLE IF EXISTS t")  # the previous example's
    con.execute("DROP TYPE IF EXISTS e")
    con.execute(f"CREATE TYPE e AS ENUM ({', '.join(quote_literal(v) for v in labels)})")
    con.execute("CREATE TABLE t(g e, x DOUBLE)")
    type_text = con.execute("DESCRIBE t").fetchall()[0][1]
    assert enum_labels(type_text) == con.execute("SELECT enum_range(NULL::e)").fetchall()[0][0] == labels


def test_enum_column_without_rows_still_has_its_labels():
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('é ü', 'b''c', 'x)y')")
    con.execute("CREATE TABLE t(g k, x DOUBLE)")
    con.execute("INSERT INTO t VALUES (NULL, 1.0)")
    assert resolve_schema(con, "t", "x").attributes[0].domain == ("é ü", "b'c", "x)y")


def test_a_column_named_like_the_probe_does_not_confuse_the_metric():
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a')")
    con.execute('CREATE TABLE t(g k, "__pcor_metric_type" VARCHAR, x DOUBLE)')
    schema = resolve_schema(con, "t", "x")
    assert schema.names == ("g",)
    with pytest.raises(UserError, match="not a number"):
        resolve_schema(con, "t", '"__pcor_metric_type"')


@pytest.mark.parametrize(
    "relation, metric, describe_apart",
    [
        ("nope", "x", lambda con, relation, metric: _describe(con, relation)),
        ("t", "nope", metric_type),
        ("t", "x +", metric_type),
    ],
)
def test_errors_are_those_of_the_part_that_fails(relation, metric, describe_apart):
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a')")
    con.execute("CREATE TABLE t(g k, x DOUBLE)")
    with pytest.raises(UserError) as got:
        resolve_schema(con, relation, metric)
    with pytest.raises(UserError) as apart:
        describe_apart(con, relation, metric)
    assert str(got.value) == str(apart.value)


def test_an_aggregate_metric_is_typed_as_before():
    # `SELECT *, count(*)` is not valid SQL, `SELECT count(*)` is: the fallback keeps the old answer.
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a')")
    con.execute("CREATE TABLE t(g k, x DOUBLE)")
    assert resolve_schema(con, "t", "count(*)").names == ("g",)


def test_a_declared_domain_past_the_maximum_is_refused_before_any_charge():
    """Issue 28 "Bad input": a 50,000-value domain is one line saying what to do, nothing charged."""
    import pcor_sql
    from pcor_sql.engine.schema import MAX_DOMAIN_VALUES

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, 'v' || (i % 60000)::VARCHAR AS city, (i % 7)::DOUBLE AS pay"
                " FROM range(61000) t(i)")
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda message: None)
    wide = {"city": [f"v{i}" for i in range(50_000)]}
    with pytest.raises(UserError, match="50,000 values, more than the 10,000") as refused:
        pcor_sql.explain_outlier(None, "SELECT pay FROM t WHERE id = 7", session=session, domains=wide,
                                 verifier="grubbs")
    assert "bin it" in str(refused.value) and "\n" not in str(refused.value)
    assert session.ledger().history() == ()
    assert MAX_DOMAIN_VALUES == 10_000
