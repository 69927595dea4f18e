"""Units of a whole statement: the select list, WHERE, subqueries anywhere, CTEs and macros are
charged like the relation, and what cannot be attributed exactly is refused in one line."""

from __future__ import annotations

import os

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.engine.units import Unit, resolve_units
from pcor_sql.errors import UserError

T, PUB = Unit("memory.main.t", "table"), Unit("memory.main.pubn", "table")


@pytest.fixture
def con(tmp_path, monkeypatch):
    """t (private: id, pay), pubn (public ids), views v over t and pv over pubn, files
    data/x.parquet and data/pub.parquet (cwd = tmp_path)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT range AS id, 100.0 + range AS pay FROM range(50)")
    c.execute("CREATE TABLE pubn AS SELECT range AS id FROM range(50)")
    c.execute("CREATE VIEW v AS SELECT * FROM t")
    c.execute("CREATE VIEW pv AS SELECT * FROM pubn")
    c.execute("COPY (SELECT range AS id, 100.0 + range AS pay FROM range(50)) TO 'data/x.parquet'")
    c.execute("COPY (SELECT range AS id, range % 3 AS dept, 1 AS yr FROM range(50)) TO 'data/pub.parquet'")
    yield c
    c.close()


def unit_of(path) -> Unit:
    return Unit("file:" + os.path.realpath(path), "file")


@pytest.mark.parametrize("statement", [
    # the metric reads t through a correlated subquery; pubn alone was charged before
    "SELECT (SELECT pay FROM t WHERE t.id = pubn.id) FROM pubn WHERE id = 42",
    "SELECT (SELECT pay FROM v WHERE v.id = p.id) AS pay FROM pv AS p WHERE id = 42",
    # the selector reads t
    "SELECT id FROM pubn WHERE id = (SELECT max(id) FROM t)",
    "SELECT id FROM pubn WHERE id IN (SELECT id FROM t WHERE pay > 120)",
    "SELECT id FROM pubn WHERE EXISTS (SELECT 1 FROM t WHERE t.id = pubn.id)",
    "SELECT id FROM pubn, LATERAL (SELECT pay FROM t WHERE t.id = pubn.id) AS l WHERE id = 42",
    "WITH c AS (SELECT * FROM t) SELECT id FROM pubn WHERE id IN (SELECT id FROM c)",
    "SELECT id FROM pubn ORDER BY (SELECT max(pay) FROM t)",
])
def test_a_subquery_anywhere_charges_what_it_reads(con, statement):
    assert resolve_units(con, statement) == (PUB, T)


def test_a_file_read_in_the_metric_or_the_selector(con, tmp_path):
    x, pub = unit_of(tmp_path / "data" / "x.parquet"), unit_of(tmp_path / "data" / "pub.parquet")
    assert resolve_units(con, "SELECT (SELECT pay FROM 'data/x.parquet' s WHERE s.id = p.id) FROM 'data/pub.parquet' p") \
        == (pub, x)
    assert resolve_units(con, "SELECT id FROM 'data/pub.parquet' WHERE id IN (SELECT id FROM read_parquet('data/x.parquet'))") \
        == (pub, x)


@pytest.mark.parametrize(("statement", "relation"), [
    ("SELECT pay FROM t WHERE id = 42", "t"),
    ("SELECT * FROM (SELECT * FROM t)", "(SELECT * FROM t)"),
    ("FROM t SELECT pay", "t"),
    ("SELECT pay FROM 'data/x.parquet' WHERE id = 42", "'data/x.parquet'"),
])
def test_a_statement_and_its_relation_agree(con, statement, relation):
    assert resolve_units(con, statement) == resolve_units(con, relation)


def test_a_macro_through_a_shadowed_view(con):
    """DESIGN.md §6 "Privacy unit": a macro reading a private file, used through a view that a temp
    view of the same name shadows, once resolved to the public file only and released ε on the
    private one."""
    con.execute("CREATE MACRO sec(i) AS (SELECT s.pay FROM 'data/x.parquet' s WHERE s.id = i)")
    con.execute("CREATE OR REPLACE VIEW w AS SELECT * FROM 'data/pub.parquet'")
    con.execute("CREATE TEMP VIEW w AS SELECT * FROM 'data/pub.parquet'")
    for sql in ("(SELECT id, dept, yr, sec(id) AS spay FROM w)", "SELECT sec(id) FROM temp.main.w WHERE id = 42",
                "SELECT sec(id) FROM pubn WHERE id = 42", "SELECT id FROM pubn WHERE sec(id) > 120"):
        with pytest.raises(UserError) as info:
            resolve_units(con, sql)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="may mean the view memory.main.w and the view temp.main.w"):
        resolve_units(con, "SELECT id FROM w")
    with pytest.raises(UserError, match="calls the macro sec"):
        resolve_units(con, "SELECT sec(id) FROM pubn WHERE id = 42")


def test_macros_that_read_nothing_are_expanded(con):
    con.execute("CREATE MACRO plus_one(x) AS x + 1")
    con.execute("CREATE TEMP MACRO twice(x) AS plus_one(x) * 2")
    assert resolve_units(con, "SELECT twice(pay) FROM t WHERE plus_one(id) = 43") == (T,)


def test_a_macro_that_calls_a_reading_macro_is_refused(con):
    con.execute("CREATE MACRO sec(i) AS (SELECT max(pay) FROM t WHERE t.id = i)")
    con.execute("CREATE TEMP MACRO outer_sec(i) AS sec(i) + 1")
    con.execute("CREATE VIEW leaky AS SELECT id, outer_sec(id) AS pay FROM pubn")
    for sql in ("SELECT outer_sec(id) FROM pubn", "SELECT pay FROM leaky WHERE id = 1", "leaky"):
        with pytest.raises(UserError, match="calls the macro outer_sec"):
            resolve_units(con, sql)


def test_a_reading_macro_named_like_a_built_in(con):
    """A macro may take a built-in's name (`lower`, `+`, `struct_extract`), and every call of
    that name reaches it. A call that reads a file through it is refused (the plan counts a file
    read the walk cannot name); a table it reads is named by the plan and charged; where a file
    read hangs on any call the macro catalog is listed and the shadowing macro refuses the query."""
    con.execute("CREATE MACRO lower(x) AS (SELECT max(pay) FROM 'data/x.parquet')")
    con.execute("CREATE MACRO upper(x) AS (SELECT max(pay) FROM t)")
    for sql in ("SELECT lower(id) FROM pubn", "SELECT id FROM pubn WHERE lower(id) > 1"):
        with pytest.raises(UserError, match="cannot be attributed"):
            resolve_units(con, sql)
    with pytest.raises(UserError, match="named like a built-in"):
        resolve_units(con, "SELECT abs((SELECT max(dept) FROM 'data/pub.parquet')) FROM pubn")
    assert resolve_units(con, "SELECT upper(id) FROM pubn") == (PUB, T)
    assert resolve_units(con, "SELECT id + 1, p.id FROM pubn AS p WHERE id IN (1, 2)") == (PUB,)


def test_a_table_macro_named_like_a_file_reader_is_refused(con):
    con.execute("CREATE MACRO read_parquet(p) AS TABLE SELECT * FROM 'data/x.parquet'")
    with pytest.raises(UserError, match="read_parquet"):
        resolve_units(con, "SELECT * FROM read_parquet('data/pub.parquet')")


def test_a_read_the_binder_drops_is_refused(con):
    """typeof() is folded when bound, dropping the subquery's file read from the plan: the walk
    and the plan disagree, so the reads are not exactly known."""
    with pytest.raises(UserError, match="plan drops"):
        resolve_units(con, "SELECT typeof((SELECT max(pay) FROM 'data/x.parquet')) FROM t")


def test_the_statement_is_bound_never_run(con):
    con.execute("CREATE TABLE bad AS SELECT 'not a number' AS s")
    sql = "SELECT (SELECT CAST(s AS INTEGER) FROM bad LIMIT 1) FROM t WHERE id = (SELECT CAST(s AS INTEGER) FROM bad)"
    with pytest.raises(duckdb.ConversionException):
        con.execute(sql).fetchall()
    assert resolve_units(con, sql) == (Unit("memory.main.bad", "table"), T)


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT FROM WHERE", "cannot parse"),
    ("SELECT 1; SELECT 2", "2 statements"),
    ("SELECT nosuch FROM t", "nosuch"),
    ("SELECT (SELECT max(a) FROM duckdb_tables()) FROM t", "duckdb_tables"),
    ("SELECT 42", "reads no table or file"),
])
def test_bad_statements_are_one_line(con, sql, match):
    with pytest.raises(UserError, match=match) as info:
        resolve_units(con, sql)
    assert "\n" not in str(info.value)


ATOMS = ["t", "v", "pubn", "'data/x.parquet'", "read_parquet('data/pub.parquet')"]
PLACES = {
    "select": "SELECT (SELECT 1 FROM {atom} LIMIT 1) AS k, * FROM {base}",
    "where": "SELECT * FROM {base} WHERE EXISTS (SELECT 1 FROM {atom})",
    "in": "SELECT * FROM {base} WHERE 1 IN (SELECT 1 FROM {atom})",
    "cte": "WITH c AS (SELECT * FROM {atom}) SELECT * FROM {base} WHERE EXISTS (SELECT 1 FROM c)",
    "order": "SELECT * FROM {base} ORDER BY (SELECT 1 FROM {atom} LIMIT 1)",
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(atom=st.sampled_from(ATOMS), base=st.sampled_from(ATOMS), place=st.sampled_from(sorted(PLACES)))
def test_a_read_anywhere_in_the_statement_adds_its_units(con, atom, base, place):
    statement = PLACES[place].format(atom=atom, base=base)
    expected = tuple(sorted(set(resolve_units(con, atom)) | set(resolve_units(con, base))))
    assert resolve_units(con, statement) == expected


def test_the_macros_are_listed_only_when_they_can_matter(con):
    from query_log import statements_run

    def listings(sql: str) -> int:
        _, statements = statements_run(con, lambda: resolve_units(con, sql))
        return sum("duckdb_functions" in s for s in statements)

    con.execute("CREATE MACRO plus_one(x) AS x + 1")
    assert listings("SELECT pay / 1000 FROM t WHERE lower(CAST(id AS VARCHAR)) = '42'") == 0  # built-ins only
    assert listings("SELECT pay FROM 'data/x.parquet' WHERE id = 42") == 0  # a file, hanging on no call
    assert listings("SELECT plus_one(pay) FROM t") == 1  # not a built-in's name
    assert listings("SELECT abs((SELECT max(pay) FROM 'data/x.parquet')) FROM t") == 1  # a file read in an argument
    assert listings("SELECT * FROM read_parquet('data/x.parquet')") == 1  # a reader a macro could shadow


def test_macros_named_like_the_engines_own_functions_change_nothing(con, tmp_path):
    """The resolver's own catalog queries call system functions by their qualified names: a macro
    named json_serialize_sql could otherwise hand the walk a parse of another query."""
    fake = '{"error": false, "statements": [{"node": {"type": "SELECT_NODE", "select_list": [], "from_table": {"type": "EMPTY"}}}]}'
    for macro in (f"json_serialize_sql(x) AS '{fake}'", "list(x) AS NULL", "row(a, b, c, d) AS NULL", "lower(x) AS 'x'",
                  "current_setting(x) AS 'all'", "current_database() AS 'nope'", "concat(a, b) AS ''",
                  "duckdb_tables() AS TABLE SELECT 1 AS x", "duckdb_views() AS TABLE SELECT 1 AS x"):
        con.execute(f"CREATE MACRO {macro}")
    x = unit_of(tmp_path / "data" / "x.parquet")
    assert resolve_units(con, "SELECT (SELECT max(pay) FROM 'data/x.parquet') FROM v WHERE id = 1") == (x, T)
    con.execute("CREATE MACRO sec(i) AS (SELECT max(pay) FROM t WHERE t.id = i)")
    with pytest.raises(UserError, match="calls the macro sec"):
        resolve_units(con, "SELECT sec(id) FROM pubn")
