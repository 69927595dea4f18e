"""`resolve_units(memo=...)`: a query of base tables is resolved once for as long as the catalog
reads the same, and afresh the moment anything that could change its units changes (a view
redefined, a table shadowed, USE, the search path); files, registered objects and function
calls are never kept."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.engine.units import MEMO_SIZE, Unit, resolve_units
from pcor_sql.errors import UserError

T = Unit("memory.main.t", "table")
U = Unit("memory.main.u", "table")
W = Unit("other.main.w", "table")


class Counting:
    """A connection that counts the statements run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con, self.statements = con, 0

    def execute(self, *args, **kwargs):
        self.statements += 1
        return self.con.execute(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.con, name)


@pytest.fixture
def con(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT range AS a FROM range(10)")
    c.execute("CREATE TABLE u AS SELECT range AS a FROM range(5)")
    c.execute("CREATE VIEW v AS SELECT * FROM t")
    c.execute("ATTACH ':memory:' AS other")
    c.execute("CREATE TABLE other.main.w AS SELECT 1 AS a")
    c.execute("COPY (SELECT range AS a FROM range(4)) TO 'x.parquet'")
    yield c
    c.close()


def test_a_second_resolution_runs_one_statement(con):
    counting, memo = Counting(con), {}
    assert resolve_units(counting, 'SELECT "a" FROM v', memo=memo) == (T,)
    first = counting.statements
    assert first >= 5  # the catalog, the plain EXPLAIN, the JSON one between a SET and its restore, the view's SQL
    assert resolve_units(counting, 'SELECT "a" FROM v', memo=memo) == (T,)
    assert counting.statements == first + 1
    assert len(memo) == 1


def test_a_redefined_view_charges_its_new_table(con):
    memo = {}
    assert resolve_units(con, "v", memo=memo) == (T,)
    con.execute("CREATE OR REPLACE VIEW v AS SELECT * FROM u")
    assert resolve_units(con, "v", memo=memo) == (U,)
    con.execute("CREATE OR REPLACE VIEW v AS SELECT t.a FROM t JOIN u ON t.a = u.a")
    assert resolve_units(con, "v", memo=memo) == (T, U)


def test_a_name_that_binds_elsewhere_is_resolved_again(con):
    memo = {}
    assert resolve_units(con, "t", memo=memo) == (T,)
    con.execute("CREATE TEMP TABLE t AS SELECT 1 AS a")  # a temporary table shadows memory.main.t
    assert resolve_units(con, "t", memo=memo) == (Unit("temp.main.t", "table"),)
    con.execute("DROP TABLE temp.main.t")
    con.execute("CREATE TABLE other.main.t AS SELECT 2 AS a")
    assert resolve_units(con, "t", memo=memo) == (T,)
    con.execute("USE other")
    assert resolve_units(con, "t", memo=memo) == (Unit("other.main.t", "table"),)
    con.execute("USE memory")
    con.execute("SET search_path = 'other.main,memory.main'")
    assert resolve_units(con, "w", memo=memo) == (W,)
    assert resolve_units(con, "t", memo=memo) == resolve_units(con, "t")


def test_files_objects_and_function_calls_are_never_kept(con):
    memo = {}
    con.register("df", pa.table({"a": [1, 2]}))
    con.execute("CREATE MACRO plus(x) AS x + 1")
    assert resolve_units(con, "'x.parquet'", memo=memo)[0].kind == "file"
    assert resolve_units(con, "df", memo=memo)[0].kind == "object"
    assert resolve_units(con, "(SELECT plus(a) AS a FROM t)", memo=memo) == (T,)
    assert memo == {}
    # Why a call is never kept: the macro may be redefined to read a table, and must then be refused.
    con.execute("CREATE OR REPLACE MACRO plus(x) AS x + (SELECT max(a) FROM u)")
    with pytest.raises(UserError):
        resolve_units(con, "(SELECT plus(a) AS a FROM t)", memo=memo)


def test_the_memo_is_bounded(con):
    memo = {}
    for i in range(MEMO_SIZE + 5):
        resolve_units(con, f"(SELECT a FROM t WHERE a = {i})", memo=memo)
    assert len(memo) == MEMO_SIZE
    assert resolve_units(con, "(SELECT a FROM t WHERE a = 0)", memo=memo) == (T,)


CHANGES = [
    "CREATE OR REPLACE VIEW memory.main.v AS SELECT * FROM memory.main.t",
    "CREATE OR REPLACE VIEW memory.main.v AS SELECT * FROM memory.main.u",
    "CREATE OR REPLACE VIEW memory.main.v AS SELECT a FROM other.main.w",
    "CREATE OR REPLACE TEMP VIEW u AS SELECT * FROM memory.main.t",
    "DROP VIEW IF EXISTS temp.main.u",
    "CREATE OR REPLACE TABLE other.main.v AS SELECT 3 AS a",
    "USE other",
    "USE memory",
    "SET search_path = 'other.main,memory.main'",
    "RESET search_path",
    "COMMENT ON TABLE memory.main.t IS 'moved'",
]
QUERIES = ["v", "u", "t", "(SELECT * FROM v JOIN u USING (a))", 'SELECT "a" FROM memory.main.v']


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(CHANGES), st.sampled_from(QUERIES)), min_size=1, max_size=8))
def test_a_kept_answer_is_always_the_fresh_one(con, steps):
    """Whatever the catalog went through, the memo answers what a fresh resolution answers
    (or refuses as it does)."""
    memo: dict = {}
    con.execute("USE memory")
    con.execute("RESET search_path")
    con.execute("DROP VIEW IF EXISTS temp.main.u")
    con.execute("CREATE OR REPLACE VIEW v AS SELECT * FROM t")
    con.execute("DROP TABLE IF EXISTS other.main.v")
    for change, query in steps:
        for q in QUERIES:  # fill the memo under the catalog as it is
            try:
                resolve_units(con, q, memo=memo)
            except UserError:
                pass
        con.execute(change)
        try:
            fresh = resolve_units(con, query)
        except UserError as exc:
            with pytest.raises(UserError) as kept:
                resolve_units(con, query, memo=memo)
            assert kept.value.problem == exc.problem
        else:
            assert resolve_units(con, query, memo=memo) == fresh
