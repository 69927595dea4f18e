"""Privacy-unit resolution: every spelling of the same data names the same units, joins name
all of theirs, what cannot be attributed is refused, and nothing depends on the rows."""

from __future__ import annotations

import os
import time

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.engine import datasets
from pcor_sql.engine.units import Unit, canonical_name, resolve_spelling, resolve_units, split_qualified
from pcor_sql.errors import UserError

T = Unit("memory.main.t", "table")
U = Unit("memory.main.u", "table")


@pytest.fixture
def con(tmp_path, monkeypatch):
    """t and u in memory.main, views over them, Parquet files in data/ (cwd = tmp_path), an
    attached database `other`, and an Arrow table registered as df."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT range AS a, range % 3 AS g FROM range(10)")
    c.execute("CREATE TABLE u AS SELECT range AS a FROM range(5)")
    c.execute("CREATE VIEW v AS SELECT * FROM t")
    c.execute("CREATE VIEW vv AS SELECT a FROM v WHERE g = 1")
    for name in ("x", "y"):
        c.execute(f"COPY (SELECT range AS a FROM range(4)) TO 'data/{name}.parquet'")
    c.execute("CREATE VIEW fv AS SELECT * FROM 'data/x.parquet'")
    c.execute("ATTACH ':memory:' AS other")
    c.execute("CREATE TABLE other.main.w AS SELECT 1 AS a")
    c.execute("CREATE VIEW other.main.ov AS SELECT * FROM w")
    c.register("df", pa.table({"a": [1, 2, 3]}))
    yield c
    c.close()


def file_unit(path) -> Unit:
    return Unit("file:" + os.path.realpath(path), "file")


@pytest.mark.parametrize("relation", [
    "t", "main.t", "memory.main.t", "T", '"t"', "t AS s", "t s(x, y)", "(SELECT * FROM t)",
    "(SELECT * FROM (SELECT a FROM t AS s) AS q WHERE a > 2)", "v", "vv", "main.v",
    "(WITH c AS (SELECT * FROM t) SELECT * FROM c)", "(WITH c AS (SELECT * FROM v), d AS (SELECT * FROM c) SELECT * FROM d)",
    "t WHERE a > 1000", "t, range(3)", "(SELECT * FROM t, unnest([1, 2]))", "(SELECT * FROM t UNION ALL SELECT 1, 2)",
    "(SELECT * FROM t WHERE a IN (SELECT a FROM t))", "(SELECT * FROM t, (VALUES (1)) AS k(b))",
    "(WITH fv AS (SELECT * FROM t) SELECT * FROM fv)", "(WITH u AS (SELECT * FROM t) SELECT * FROM u, u AS w)",
    "(WITH RECURSIVE r(n) AS (SELECT a FROM t UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r)",
    "(WITH c AS (SELECT * FROM u) SELECT * FROM (WITH c AS (SELECT * FROM t) SELECT * FROM c))",
])
def test_every_spelling_of_a_table_is_one_unit(con, relation):
    assert resolve_units(con, relation) == (T,)


@pytest.mark.parametrize("relation", [
    "t JOIN u USING (a)", "t, u", "(SELECT * FROM v WHERE a IN (SELECT a FROM u))", "u JOIN vv USING (a)",
    "(WITH c AS (SELECT * FROM u) SELECT * FROM t, c)", "(SELECT * FROM t WHERE a < (SELECT max(a) FROM u))",
])
def test_a_join_or_subquery_names_every_table_it_reads(con, relation):
    assert resolve_units(con, relation) == (T, U)


def test_use_of_another_database_then_the_qualified_name(con):
    con.execute("USE other")
    assert resolve_units(con, "memory.t") == resolve_units(con, "memory.main.t") == (T,)
    # A view binds in its own catalog: memory.v reads memory's t, whatever the session uses.
    assert resolve_units(con, "memory.v") == (T,)
    assert resolve_units(con, "w") == resolve_units(con, "ov") == (Unit("other.main.w", "table"),)
    con.execute("USE memory")
    assert resolve_units(con, "other.w") == resolve_units(con, "other.ov") == (Unit("other.main.w", "table"),)


def test_a_search_path_is_followed(con):
    con.execute("SET search_path = 'other.main'")
    assert resolve_units(con, "w") == resolve_units(con, "ov") == (Unit("other.main.w", "table"),)
    assert resolve_units(con, "memory.t") == resolve_units(con, "memory.v") == (T,)
    with pytest.raises(UserError, match="does not exist"):
        resolve_units(con, "t")


def test_a_temp_table_shadows_main_as_duckdb_binds_it(con):
    con.execute("CREATE TEMP TABLE t AS SELECT 1 AS a")
    temp = Unit("temp.main.t", "table")
    assert resolve_units(con, "t") == resolve_units(con, "main.t") == resolve_units(con, "v") == (temp,)
    assert resolve_units(con, "memory.main.t") == (T,)


@pytest.mark.parametrize("relation", [
    "'data/x.parquet'", '"data/x.parquet"', "'./data/../data/x.parquet'", "read_parquet('data/x.parquet')",
    "parquet_scan('data/x.parquet')", "read_parquet(['data/x.parquet'])", "fv", "(SELECT * FROM fv AS f)",
    "(WITH c AS (SELECT * FROM 'data/x.parquet') SELECT * FROM c)", "read_parquet('data/x.parquet', filename = true)",
])
def test_every_spelling_of_a_file_is_one_unit(con, tmp_path, relation):
    assert resolve_units(con, relation) == (file_unit(tmp_path / "data" / "x.parquet"),)


def test_absolute_and_relative_paths_and_symlinks_agree(con, tmp_path):
    absolute = tmp_path / "data" / "x.parquet"
    (tmp_path / "link.parquet").symlink_to(absolute)
    expected = (file_unit(absolute),)
    assert resolve_units(con, f"'{absolute}'") == expected
    assert resolve_units(con, f"read_parquet('{absolute}')") == expected
    assert resolve_units(con, "'link.parquet'") == expected


def test_a_glob_or_list_charges_every_file_it_reads(con, tmp_path):
    both = (file_unit(tmp_path / "data" / "x.parquet"), file_unit(tmp_path / "data" / "y.parquet"))
    assert resolve_units(con, "'data/*.parquet'") == both
    assert resolve_units(con, "read_parquet('data/*.parquet')") == both
    assert resolve_units(con, "read_parquet(['data/x.parquet', 'data/y.parquet'])") == both
    assert resolve_units(con, "fv JOIN 'data/y.parquet' USING (a)") == both
    assert resolve_units(con, "t JOIN fv USING (a)") == (file_unit(tmp_path / "data" / "x.parquet"), T)


def test_csv_and_json_readers(con, tmp_path):
    con.execute("COPY (SELECT 1 AS a) TO 'data/z.csv'")
    con.execute("COPY (SELECT 1 AS a) TO 'data/z.json'")
    csv, js = file_unit(tmp_path / "data" / "z.csv"), file_unit(tmp_path / "data" / "z.json")
    for relation in ("'data/z.csv'", "read_csv('data/z.csv')", "read_csv_auto('data/z.csv')", "read_text('data/z.csv')"):
        assert resolve_units(con, relation) == (csv,)
    for relation in ("'data/z.json'", "read_json('data/z.json')", "read_json_auto('data/z.json')"):
        assert resolve_units(con, relation) == (js,)


def test_relative_paths_follow_file_search_path(con, tmp_path):
    con.execute(f"SET file_search_path = '{tmp_path / 'data'}'")
    assert resolve_units(con, "'x.parquet'") == (file_unit(tmp_path / "data" / "x.parquet"),)


def test_a_registered_arrow_table_is_an_object_unit(con):
    df = Unit("object:temp.main.df", "object")
    for relation in ("df", "temp.main.df", "df AS d", "(SELECT * FROM df)", "(SELECT * FROM df WHERE a > 1)"):
        assert resolve_units(con, relation) == (df,)
    con.execute("CREATE TEMP VIEW dv AS SELECT * FROM df")
    assert resolve_units(con, "dv JOIN t USING (a)") == (T, df)


def test_bundled_tables_have_stable_names_wherever_loaded():
    c = duckdb.connect()
    datasets.load_all(c)
    datasets.load_dataset(c, "salaries", table_name="pay")
    c.execute("ATTACH ':memory:' AS other")
    c.execute("USE other")
    datasets.load_dataset(c, "homicides")
    c.execute("USE memory")
    salaries, homicides = Unit("bundled:salaries", "bundled"), Unit("bundled:homicides", "bundled")
    assert resolve_units(c, "salaries") == resolve_units(c, "pay") == resolve_units(c, "memory.main.salaries") == (salaries,)
    assert resolve_units(c, "other.homicides") == resolve_units(c, "homicides") == (homicides,)
    assert resolve_units(c, "salaries JOIN diamonds USING (id)") == (Unit("bundled:diamonds", "bundled"), salaries)
    comment = c.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'pay'").fetchall()
    assert comment == [(datasets.BUNDLED_COMMENT_PREFIX + "salaries",)]


def test_resolution_takes_milliseconds_on_the_bundled_data():
    c = duckdb.connect()
    datasets.load_all(c)
    resolve_units(c, "salaries")
    start = time.perf_counter()
    for _ in range(10):
        resolve_units(c, "salaries s JOIN homicides h USING (id)")
    assert (time.perf_counter() - start) / 10 < 0.25  # measured ~10 ms on a loaded 2-core machine


def test_the_units_never_depend_on_the_rows(con):
    """The rows are never read: a view whose rows fail on read still resolves, and the number
    of rows (or statistics that would let the optimiser prune a scan) changes nothing."""
    con.execute("CREATE TABLE bad AS SELECT 'not a number' AS s")
    con.execute("CREATE VIEW breaks AS SELECT CAST(s AS INTEGER) AS n FROM bad")
    with pytest.raises(duckdb.ConversionException):
        con.execute("SELECT * FROM breaks").fetchall()
    assert resolve_units(con, "breaks") == (Unit("memory.main.bad", "table"),)
    relation = "(SELECT * FROM t WHERE a > 1000) JOIN u USING (a)"
    before = resolve_units(con, relation)
    con.execute("DELETE FROM t")
    assert resolve_units(con, relation) == before
    con.execute("INSERT INTO t SELECT range, 0 FROM range(100000)")
    assert resolve_units(con, relation) == before == (T, U)


def test_the_callers_settings_are_restored(con):
    def setting():
        return con.execute("SELECT current_setting('explain_output')").fetchall()

    assert setting() == [("PHYSICAL_ONLY",)]
    resolve_units(con, "t")
    assert setting() == [("PHYSICAL_ONLY",)]
    con.execute("SET explain_output = 'optimized_only'")
    before = setting()
    resolve_units(con, "fv")
    with pytest.raises(UserError):
        resolve_units(con, "nosuch")
    assert setting() == before
    con.execute("SET explain_output = 'all'")
    resolve_units(con, "t")
    assert setting() == [("all",)]


def test_a_bad_relation_in_a_transaction_leaves_the_setting_alone(con):
    con.execute("BEGIN")
    with pytest.raises(UserError, match="nosuch"):
        resolve_units(con, "nosuch")
    con.execute("ROLLBACK")
    assert con.execute("SELECT current_setting('explain_output')").fetchall() == [("PHYSICAL_ONLY",)]


@pytest.mark.parametrize(("relation", "match"), [
    ("nosuch", "nosuch does not exist"),
    ("nosuch_function()", "nosuch_function"),
    ("'data/x.parquet", "unterminated"),
    ("t; DROP TABLE t", "cannot parse"),
    ("", "empty"),
    ("duckdb_tables()", "duckdb_tables"),
    ("(SELECT * FROM t, duckdb_tables())", "duckdb_tables"),
    ("information_schema.tables", "duckdb_tables"),
    ("range(3)", "reads no table or file"),
    ("read_parquet('data/' || 'x.parquet')", "string literal"),
    ("'data/missing.parquet'", "missing.parquet"),
    ("glob('data/*')", "glob"),
])
def test_what_cannot_be_attributed_is_refused_in_one_line(con, relation, match):
    with pytest.raises(UserError, match=match) as info:
        resolve_units(con, relation)
    assert "\n" not in str(info.value)
    assert resolve_units(con, "t") == (T,)  # the connection still works


def test_macros_that_read_are_refused(con):
    """A macro's body is expanded by the binder behind the walk: one that reads is refused, even
    where the plan's count of file reads would balance (the file read elsewhere, or a CTE)."""
    con.execute("CREATE MACRO hidden() AS TABLE SELECT * FROM 'data/y.parquet'")
    con.execute("CREATE MACRO biggest() AS (SELECT max(a) FROM 'data/y.parquet')")
    with pytest.raises(UserError, match="hidden"):
        resolve_units(con, "hidden()")
    for relation in (
        "(SELECT * FROM t WHERE a < biggest())", "(SELECT * FROM 'data/x.parquet' WHERE a < biggest())",
        "(WITH c AS (SELECT * FROM 'data/x.parquet') SELECT * FROM t WHERE a < biggest())",
    ):
        with pytest.raises(UserError, match="calls the macro biggest"):
            resolve_units(con, relation)


def test_a_python_variable_found_by_replacement_scan_is_refused(con, tmp_path):
    (tmp_path / "secret").write_text("")  # a file of the same name does not cover for it
    secret = pa.table({"a": [1]})  # found by DuckDB's replacement scan in this frame
    con.execute("SET python_scan_all_frames = true")
    assert con.execute("SELECT count(*) FROM secret").fetchall() == [(secret.num_rows,)]
    with pytest.raises(UserError, match="cannot be attributed"):
        resolve_units(con, "(SELECT * FROM t, secret)")


def test_a_view_shadowed_by_a_view_is_refused_unless_qualified(con, tmp_path):
    """Which of two same-named views DuckDB binds is not guessed: the name is refused, and a
    fully qualified name is exact."""
    con.execute("CREATE TEMP VIEW fv AS SELECT * FROM 'data/y.parquet'")
    x, y = file_unit(tmp_path / "data" / "x.parquet"), file_unit(tmp_path / "data" / "y.parquet")
    for relation in ("fv", "main.fv", "(SELECT * FROM fv)"):
        with pytest.raises(UserError, match="may mean the view memory.main.fv and the view temp.main.fv") as info:
            resolve_units(con, relation)
        assert "\n" not in str(info.value)
    assert resolve_units(con, "temp.main.fv") == (y,)
    assert resolve_units(con, "memory.main.fv") == (x,)


def test_odd_identifiers_round_trip():
    for parts in [("memory", "main", "t"), ("memory", "main", "my.t"), ("a b", "main", 'q"uote'), ("temp", "main", "Select")]:
        assert split_qualified(canonical_name(parts)) == parts
    assert split_qualified('"temp".main.t') == ("temp", "main", "t")
    assert canonical_name(("memory", "main", "my table")) == 'memory.main."my table"'


def test_a_table_with_an_odd_name(con):
    con.execute('CREATE TABLE "my.odd ""t""" AS SELECT 1 AS a')
    unit = Unit('memory.main."my.odd ""t"""', "table")
    assert resolve_units(con, '"my.odd ""t"""') == (unit,)
    assert resolve_spelling(con, unit.name) == (unit,)


@pytest.mark.parametrize("spelling", ["t", "main.t", "memory.main.t", " T ", "v", "vv", "memory.main.t"])
def test_spelling_of_a_table(con, spelling):
    assert resolve_spelling(con, spelling) == (T,)


@pytest.mark.parametrize("spelling", [
    "data/x.parquet", "'data/x.parquet'", '"data/x.parquet"', "./data/x.parquet", "data/x*.parquet", "fv",
])
def test_spelling_of_a_file(con, tmp_path, spelling):
    assert resolve_spelling(con, spelling) == (file_unit(tmp_path / "data" / "x.parquet"),)


def test_spelling_of_absolute_paths_globs_and_unit_names(con, tmp_path):
    x, y = file_unit(tmp_path / "data" / "x.parquet"), file_unit(tmp_path / "data" / "y.parquet")
    assert resolve_spelling(con, str(tmp_path / "data" / "x.parquet")) == (x,)
    assert resolve_spelling(con, f"'{tmp_path}/data/*.parquet'") == (x, y)
    assert resolve_spelling(con, x.name) == (x,)
    assert resolve_spelling(con, "bundled:salaries") == (Unit("bundled:salaries", "bundled"),)
    assert resolve_spelling(con, "object:temp.main.df") == (Unit("object:temp.main.df", "object"),)
    assert resolve_spelling(con, "df") == (Unit("object:temp.main.df", "object"),)
    assert resolve_spelling(con, "t JOIN u USING (a)") == (T, U)
    for unit in resolve_units(con, "t JOIN fv USING (a)"):
        assert resolve_spelling(con, unit.name) == (unit,)


@pytest.mark.parametrize(("spelling", "match"), [
    ("", "empty"), ("bundled:nope", "unknown bundled"), ("data/missing.parquet", "missing"),
    ("file:/nonexistent/x.parquet", "x.parquet"), ("object:memory.main.t", "not a registered object"),
    ("nosuch", "does not exist"),
])
def test_bad_spellings_are_refused(con, spelling, match):
    with pytest.raises(UserError, match=match):
        resolve_spelling(con, spelling)


# Relations over t, u, x.parquet and df; wrapping one in a subquery, an alias or a CTE, or
# joining two, must give exactly the units of the parts.
ATOMS = ["t", "main.t", "v", "vv", "u", "'data/x.parquet'", "read_parquet('data/y.parquet')", "fv", "df"]


def _wrap(kind: str, inner: str, n: int) -> str:
    if kind == "subquery":
        return f"(SELECT * FROM {inner})"
    if kind == "alias":
        return f"(SELECT * FROM {inner} AS a{n})"
    if kind == "cte":
        return f"(WITH c{n} AS (SELECT * FROM {inner}) SELECT * FROM c{n})"
    return f"(SELECT * FROM {inner} WHERE 1 = 1)"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    left=st.sampled_from(ATOMS), right=st.sampled_from(ATOMS),
    wraps=st.lists(st.sampled_from(["subquery", "alias", "cte", "where"]), max_size=4),
)
def test_wrapping_or_joining_never_changes_the_units(con, left, right, wraps):
    wrapped = left
    for n, kind in enumerate(wraps):
        wrapped = _wrap(kind, wrapped, n)
    assert resolve_units(con, wrapped) == resolve_units(con, left)
    joined = f"(SELECT * FROM {wrapped} AS l, {right} AS r)"
    assert resolve_units(con, joined) == tuple(sorted(set(resolve_units(con, left)) | set(resolve_units(con, right))))
