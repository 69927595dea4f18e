"""Units by identity: a DuckDB table is named by the database file it lives in, never by the
alias the file was opened or attached under; a file by its real path, whatever URI or relative
spelling reaches it; a hard link never opens a second account."""

from __future__ import annotations

import os

import duckdb
import pytest

from pcor_sql.engine import datasets
from pcor_sql.engine.units import Unit, home_database, resolve_spelling, resolve_units
from pcor_sql.errors import UserError

MAIN_T = Unit("main.t", "table")


@pytest.fixture
def data_file(tmp_path):
    """data.duckdb holding t (and a view v over it), closed; its hard link hard.duckdb."""
    path = tmp_path / "data.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS id, 100.0 + range AS pay FROM range(10)")
    con.execute("CREATE VIEW v AS SELECT * FROM t")
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.t AS SELECT 1 AS id")
    con.close()
    os.link(path, tmp_path / "hard.duckdb")
    return path


@pytest.mark.parametrize("opened", ["data.duckdb", "hard.duckdb"])
def test_the_ledgers_own_database_names_tables_without_its_alias(data_file, opened):
    con = duckdb.connect(str(data_file.parent / opened))
    try:
        alias = opened.removesuffix(".duckdb")
        for relation in ("t", "main.t", f"{alias}.t", f"{alias}.main.t", "v", f"SELECT pay FROM {alias}.v WHERE id = 1"):
            assert resolve_units(con, relation) == (MAIN_T,)
        assert resolve_units(con, "s.t") == (Unit("s.t", "table"),)
        con.execute("ATTACH ':memory:' AS scratch")
        con.execute("USE scratch")
        assert resolve_units(con, f"{alias}.t") == resolve_units(con, f"{alias}.v") == (MAIN_T,)
        assert resolve_spelling(con, "main.t") == (MAIN_T,)  # the unit's name, whatever USE says
        con.execute(f"USE {alias}")
        con.execute("CREATE TEMP TABLE t AS SELECT 1 AS id")
        assert resolve_spelling(con, "main.t") == (MAIN_T,)  # ... and whatever shadows it
        assert resolve_units(con, "t") == (Unit("temp.main.t", "table"),)
    finally:
        con.close()


def test_the_ledgers_file_attached_again_under_any_alias_is_the_same_database(data_file):
    con = duckdb.connect(str(data_file))
    try:
        con.execute(f"ATTACH '{data_file.parent / 'hard.duckdb'}' AS anything (READ_ONLY)")
        assert resolve_units(con, "anything.t") == resolve_units(con, "anything.main.v") == (MAIN_T,)
        assert resolve_units(con, "t JOIN anything.t AS h USING (id)") == (MAIN_T,)
    finally:
        con.close()


@pytest.mark.parametrize("name", ["data.duckdb", "hard.duckdb"])
def test_another_duckdb_file_attached_is_refused_it_keeps_its_own_ledger(data_file, name):
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE mine AS SELECT 1 AS id")
        for alias in ("data", "anything"):
            con.execute(f"ATTACH '{data_file.parent / name}' AS {alias} (READ_ONLY)")
            for sql in (f"{alias}.t", f"SELECT id FROM mine WHERE id IN (SELECT id FROM {alias}.v)"):
                with pytest.raises(UserError, match="keeps its own budget ledger") as info:
                    resolve_units(con, sql)
                assert "\n" not in str(info.value) and "--db" in str(info.value)
            con.execute(f"DETACH {alias}")
        assert resolve_units(con, "mine") == (Unit("memory.main.mine", "table"),)
    finally:
        con.close()


def test_in_memory_databases_keep_catalog_names():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS id")
    con.execute("ATTACH ':memory:' AS other")
    con.execute("CREATE TABLE other.t AS SELECT 1 AS id")
    assert home_database(con).identity is None
    assert resolve_units(con, "t JOIN other.t AS o USING (id)") == (Unit("memory.main.t", "table"), Unit("other.main.t", "table"))


def test_bundled_tables_keep_their_names_in_a_database_file(tmp_path):
    con = duckdb.connect(str(tmp_path / "b.duckdb"))
    try:
        datasets.load_dataset(con, "salaries")
        assert resolve_units(con, "salaries") == (Unit("bundled:salaries", "bundled"),)
    finally:
        con.close()


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    con = duckdb.connect()
    con.execute("COPY (SELECT range AS id, 1.0 * range AS pay FROM range(5)) TO 'd/x.parquet'")
    yield con, tmp_path / "d" / "x.parquet"
    con.close()


def test_every_uri_and_relative_spelling_of_a_file_is_one_unit(files):
    con, path = files
    unit = (Unit(f"file:{path}", "file"),)
    d = path.parent
    spellings = [
        f"'file://{path}'", f"'file://{d}/./x.parquet'", f"'file://{d}/../d/x.parquet'", f"'file:{path}'",
        f"'file://localhost{path}'", "'d/x.parquet'", "'./d/../d/x.parquet'", f"'{d}/./x.parquet'",
        f"read_parquet('file://{path}')", f"read_parquet(['file://{d}/./x.parquet'])", f"'file://{d}/x*.parquet'",
    ]
    for relation in spellings:
        assert resolve_units(con, relation) == unit, relation
        assert resolve_units(con, f"SELECT pay FROM {relation} WHERE id = 1") == unit
    for spelling in (f"file://{path}", f"file://{d}/./x.parquet", f"file:{path}", "d/x.parquet", f"'file://{path}'"):
        assert resolve_spelling(con, spelling) == unit, spelling


def test_a_hard_linked_file_is_refused_under_every_name(files):
    con, path = files
    link = path.parent / "hard.parquet"
    os.link(path, link)
    for sql in ("'d/x.parquet'", "'d/hard.parquet'", f"'file://{link}'", "SELECT pay FROM 'd/hard.parquet' WHERE id = 1"):
        with pytest.raises(UserError, match="has 2 hard links") as info:
            resolve_units(con, sql)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="hard links"):
        resolve_spelling(con, str(link))
    os.unlink(link)  # the other link gone, the file is charged again, to its own path
    assert resolve_units(con, "'d/x.parquet'") == (Unit(f"file:{path}", "file"),)
