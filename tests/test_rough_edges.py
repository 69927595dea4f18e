"""The rough edges a newcomer met (DESIGN.md §5 "Interfaces users rely on"): each summary names its own record, an
empty table is named as such, and the histogram says how many rows a context needs."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import NoValidContext, UserError
from pcor_sql.readable import record_words, selector_key


@pytest.mark.parametrize(
    "selector, record, words",
    [
        ("(id IN (44, 365, 250))", {"id": 365, "v": 1.0}, "the record where id = 365"),
        ("(id = 42)", {"id": 42}, "the record where id = 42"),
        ("(\"Row Id\" IN ('a', 'b'))", {"Row Id": "b"}, "the record where \"Row Id\" = 'b'"),
        ("(name IN ('x AND y', 'z'))", {"name": "x AND y"}, "the record where name = 'x AND y'"),
        # Not a selector by one column: the caller's words, whole.
        ("((id = 42) AND (v = 1))", {"id": 42, "v": 1}, "the record where (id = 42) AND (v = 1)"),
        ("(id = 42 OR id = 43)", {"id": 42}, "the record where id = 42 OR id = 43"),
        ("(id > 3)", {"id": 42}, "the record where id > 3"),
        ("(other IN (1, 2))", {"id": 42}, "the record where other IN (1, 2)"),
    ],
)
def test_a_record_is_named_by_its_own_key(selector, record, words):
    assert record_words(selector, record) == words
    assert record_words(selector) == f"the record where {selector[1:-1]}"


def test_no_key_without_the_record():
    assert selector_key("(id = 1)", None) is None and selector_key("(id = 1)", {}) is None


def test_each_summary_of_several_records_names_its_own_key():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, ['a', 'b'][i % 2 + 1] AS g,"
                " CASE WHEN i IN (7, 30) THEN 1000.0 ELSE 10.0 + i % 5 END AS v FROM range(60) r(i)")
    results = pcor_sql.explain_outliers(
        con, "SELECT v FROM t WHERE id IN (7, 30)", by="g", domains={"g": ["a", "b"]}, verifier="zscore(z=3)",
        epsilon=0.2, seed=1, allow_seeded=True, ledger=":memory:", warn=lambda *a: None,
    )
    assert [r.summary.split(" is an outlier")[0] for r in results] == [
        "v of the record where id = 7", "v of the record where id = 30"]


def test_an_empty_table_is_named_as_such():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, rank VARCHAR, v DOUBLE)")
    with pytest.raises(UserError, match="the table is empty"):
        pcor_sql.explain_outlier(con, "SELECT v FROM t WHERE id = 1", by="rank", epsilon=0.2, ledger=":memory:",
                                 warn=lambda *a: None)


def test_the_histogram_names_the_population_each_bin_needs():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, ['a', 'b'][i % 2 + 1] AS g,"
                " CASE WHEN i = 7 THEN 1000.0 ELSE 10.0 + i % 5 END AS v FROM range(397) r(i)")
    with pytest.raises(NoValidContext) as caught:
        pcor_sql.explain_outlier(con, "SELECT v FROM t WHERE id = 7", by="g", domains={"g": ["a", "b"]},
                                 verifier="histogram", epsilon=0.2, ledger=":memory:", warn=lambda *a: None)
    text = str(caught.value)
    assert "rel = 0.0025" in text and "1/rel = 400 rows" in text and "N ≥ 401" in text and "397" in text


def test_the_readme_says_where_the_ledger_is_what_the_tests_need_and_when_is_not_null_appears():
    import pathlib

    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    set_up = readme.split("## Set-up")[1].split("\n## ")[0]
    assert "~/.local/share/pcor-sql/ledger.duckdb" in set_up and "XDG_DATA_HOME" in set_up
    assert "pyspark" in set_up and "Java 17" in set_up
    reference = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "declared `NOT NULL`" in reference and '"job_title" IS NOT NULL' in reference and "DESIGN §2" in reference


def test_a_full_attribute_is_omitted_when_declared_not_null_and_written_is_not_null_otherwise():
    from pcor_sql.core.space import Attribute, ContextSpace
    from pcor_sql.engine.context_sql import context_predicate

    space = ContextSpace([Attribute("g", ("a", "b")), Attribute("h", ("x", "y"))], [0, 0])
    mask = space.from_values({"g": ["a", "b"], "h": ["x"]})
    assert context_predicate(space, mask, not_null=frozenset({"g"})) == "\"h\" = 'x'"
    padded = context_predicate(space, mask)
    assert padded == "\"g\" IS NOT NULL AND \"h\" = 'x'"
    # The padding is what makes the released SQL select the context's rows: a NULL g is in none.
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 'x'), ('b', 'x'), (NULL, 'x'), ('a', 'y')) v(g, h)")
    assert con.execute(f"SELECT count(*) FROM t WHERE {padded}").fetchall() == [(2,)]
