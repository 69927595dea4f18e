"""The bundled datasets as the engine loads them: tables, ENUM domains, API, errors, export."""

from __future__ import annotations

import time

import duckdb
import pytest

from pcor_sql.engine import datasets as ds
from pcor_sql.errors import UserError

ROWS = {"salaries": 51_000, "homicides": 110_000, "diamonds": 53_940}
# dataset → attribute → (declared domain size, values present in the data)
DOMAIN_SIZES = {
    "salaries": {"job_title": (9, 8), "employer": (8, 7), "year": (8, 7)},
    "homicides": {"agency_type": (5, 4), "state": (7, 6), "weapon": (7, 6)},
    "diamonds": {"cut": (6, 5), "color": (8, 7), "clarity": (9, 8)},
}


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    ds.load_all(c)
    yield c
    c.close()


def _one(con, sql, params=None):
    rows = con.execute(sql, params or []).fetchall()
    assert len(rows) == 1
    return rows[0]


def test_bundled_names_and_infos():
    infos = ds.list_datasets()
    assert [i.name for i in infos] == list(ds.BUNDLED) == ["salaries", "homicides", "diamonds"]
    for info in infos:
        assert info.rows == ROWS[info.name]
        assert info.id_column == "id"
        assert tuple(ds.declared_domains(info.name)) == info.attributes
        assert info.path.is_file() and info.path.stat().st_size < 1_500_000
        assert info.description and info.source and "MIT" in info.licence
    assert ds.dataset_info("salaries").metric == "salary"
    assert ds.dataset_info("homicides").metric == "victim_age"
    assert ds.dataset_info("diamonds").metric == "price"


@pytest.mark.parametrize("name", ds.BUNDLED)
def test_row_counts_and_unique_ids(con, name):
    n, distinct, lo, hi, nulls = _one(
        con, f"SELECT count(*), count(DISTINCT id), min(id), max(id), count(*) - count(id) FROM {name}"
    )
    assert (n, distinct, lo, hi, nulls) == (ROWS[name], ROWS[name], 1, ROWS[name], 0)


@pytest.mark.parametrize("name", ds.BUNDLED)
def test_attributes_are_enums_over_the_declared_domains(con, name):
    domains = ds.declared_domains(name)
    assert {a: len(v) for a, v in domains.items()} == {a: s[0] for a, s in DOMAIN_SIZES[name].items()}
    for attr, domain in domains.items():
        sql = "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?"
        type_text = _one(con, sql, [name, attr])[0]
        assert type_text.startswith("ENUM(")
        (labels,) = _one(con, f"SELECT enum_range(NULL::{ds.enum_type_name(name, attr)})")
        assert labels == domain
        present = [r[0] for r in con.execute(f"SELECT DISTINCT {attr}::VARCHAR FROM {name}").fetchall()]
        assert set(present) <= set(domain)
        absent = set(domain) - set(present)
        assert len(present) == DOMAIN_SIZES[name][attr][1]
        assert absent, f"{name}.{attr} declares no value absent from the data"
        # The absent value is a real member of the type: it compares and filters without error.
        value = sorted(absent)[0]
        assert _one(con, f"SELECT count(*) FROM {name} WHERE {attr} = ?", [value]) == (0,)
        assert _one(con, f"SELECT count(*) FROM {name} WHERE {attr} IS NULL") == (0,)


def test_salaries_specifics(con):
    assert _one(con, "SELECT min(salary) >= 100000, count(*) - count(salary) FROM salaries") == (True, 0)
    assert _one(con, "SELECT typeof(salary) FROM salaries LIMIT 1") == ("DOUBLE",)
    # Realistic right skew: mean above median, a long tail.
    mean, median, top = _one(con, "SELECT avg(salary), median(salary), max(salary) FROM salaries")
    assert mean > median and top > 3 * median
    # Some exact duplicates (grid pay, round contract salaries), as in the real list.
    assert _one(con, "SELECT count(*) - count(DISTINCT salary) FROM salaries")[0] > 100
    # Salaries are whole cents.
    assert _one(con, "SELECT count(*) FROM salaries WHERE abs(salary * 100 - round(salary * 100)) > 1e-6") == (0,)
    years = [r[0] for r in con.execute("SELECT DISTINCT year::VARCHAR FROM salaries ORDER BY 1").fetchall()]
    assert years == [str(y) for y in range(2013, 2020)]


def test_homicides_and_diamonds_metrics(con):
    assert _one(con, "SELECT min(victim_age), max(victim_age), count(*) - count(victim_age) FROM homicides") == (0, 99, 0)
    # ggplot2's documented facts about diamonds.
    assert _one(con, "SELECT min(price), max(price), sum(price) FROM diamonds") == (326, 18823, 212_135_217)
    counts = dict(con.execute("SELECT cut::VARCHAR, count(*) FROM diamonds GROUP BY 1").fetchall())
    assert counts == {"Fair": 1610, "Good": 4906, "Very Good": 12082, "Premium": 13791, "Ideal": 21551}


@pytest.mark.parametrize("name", ["salaries", "homicides"])
def test_planted_outliers_exist_in_their_cells(con, name):
    details = ds.planted_outlier_details(name)
    ids = ds.planted_outliers(name)
    assert ids == sorted(ids) == [p.id for p in details] and len(set(ids)) == len(ids) >= 24
    for p in details:
        cols = list(p.cell)
        row = _one(con, f"SELECT {', '.join(c + '::VARCHAR' for c in cols)} FROM {name} WHERE id = ?", [p.id])
        assert dict(zip(cols, row)) == p.cell, p
        assert p.description
    if name == "salaries":
        assert 42 in ids
    assert ds.planted_outliers("diamonds") == []


def test_load_into_fresh_connection_is_fast_and_offline_safe():
    c = duckdb.connect()
    try:
        start = time.perf_counter()
        assert ds.load_all(c) == list(ds.BUNDLED)
        elapsed = time.perf_counter() - start
        # Measured ≈ 0.1–0.2 s on 2 cores; the bound only catches a gross regression.
        assert elapsed < 3.0
        assert _one(c, "SELECT salary FROM salaries WHERE id = 42")[0] > 180_000
    finally:
        c.close()


def test_errors_name_the_problem_and_the_fix():
    c = duckdb.connect()
    try:
        with pytest.raises(UserError, match=r"unknown dataset 'x' — use one of: salaries, homicides, diamonds"):
            ds.load_dataset(c, "x")
        for call in (ds.planted_outliers, ds.declared_domains, ds.dataset_info):
            with pytest.raises(UserError, match="unknown dataset"):
                call("nope")
        ds.load_dataset(c, "salaries")
        with pytest.raises(UserError, match="table named 'salaries' already exists — pass replace=True"):
            ds.load_dataset(c, "salaries")
        c.execute("DELETE FROM salaries WHERE id > 10")
        assert ds.load_dataset(c, "salaries", replace=True) == "salaries"
        assert _one(c, "SELECT count(*) FROM salaries") == (ROWS["salaries"],)
        # Another table name gets its own types; a foreign type of the same name is not clobbered.
        assert ds.load_dataset(c, "homicides", table_name="h 2") == "h 2"
        assert _one(c, 'SELECT count(*) FROM "h 2"') == (ROWS["homicides"],)
        c.execute("CREATE TYPE diamonds_cut AS ENUM ('round')")
        with pytest.raises(UserError, match="type named 'diamonds_cut' already exists with other values"):
            ds.load_dataset(c, "diamonds")
        # ... and the failed load left nothing behind.
        leftovers = c.execute(
            "SELECT type_name FROM duckdb_types() WHERE type_name LIKE 'diamonds_%' AND NOT internal"
        ).fetchall()
        assert leftovers == [("diamonds_cut",)]
        assert _one(c, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'diamonds'") == (0,)
        ds.load_dataset(c, "diamonds", replace=True)
        assert _one(c, "SELECT enum_range(NULL::diamonds_cut)")[0] == ds.declared_domains("diamonds")["cut"]
    finally:
        c.close()


def test_export_parquet_round_trips(tmp_path, con):
    path = ds.export_dataset(None, "salaries", tmp_path / "s.parquet", "parquet")
    assert path.is_file()
    cols = "id, job_title::VARCHAR, employer::VARCHAR, year::VARCHAR, salary"
    for a, b in (("read_parquet($1)", "salaries"), ("salaries", "read_parquet($1)")):
        diff = _one(con, f"SELECT count(*) FROM (SELECT {cols} FROM {a} EXCEPT ALL SELECT {cols} FROM {b})", [str(path)])
        assert diff == (0,)
    assert _one(con, "SELECT count(*) FROM read_parquet(?)", [str(path)]) == (ROWS["salaries"],)
    with pytest.raises(UserError, match="already exists — pass overwrite=True"):
        ds.export_dataset(None, "salaries", path, "parquet")
    ds.export_dataset(con, "homicides", path, "parquet", overwrite=True)
    assert _one(con, "SELECT count(*) FROM read_parquet(?)", [str(path)]) == (ROWS["homicides"],)
    with pytest.raises(UserError, match="unknown export format 'csv' — use one of: parquet, duckdb"):
        ds.export_dataset(None, "salaries", tmp_path / "s.csv", "csv")


def test_export_duckdb_keeps_enum_domains(tmp_path, con):
    path = ds.export_dataset(con, "diamonds", tmp_path / "d.duckdb", "duckdb")
    # Nothing is left attached to, or created in, the working connection.
    assert "pcor_sql_export" not in {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    out = duckdb.connect(str(path))
    try:
        for attr, domain in ds.declared_domains("diamonds").items():
            assert _one(out, f"SELECT enum_range(NULL::{ds.enum_type_name('diamonds', attr)})")[0] == domain
        rows = out.execute("SELECT * FROM diamonds ORDER BY id").fetchall()
    finally:
        out.close()
    assert rows == con.execute("SELECT * FROM diamonds ORDER BY id").fetchall()
    with pytest.raises(UserError, match="already exists"):
        ds.export_dataset(None, "diamonds", path, "duckdb")
    ds.export_dataset(None, "diamonds", path, "duckdb", overwrite=True)
