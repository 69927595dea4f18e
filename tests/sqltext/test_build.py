"""Every builder's text runs on DuckDB and returns what its name says; the text the frontend's
golden fixtures record is pinned here too."""

from __future__ import annotations

import math

import duckdb
import pytest

from pcor_sql.errors import InternalError
from pcor_sql.sqltext import build as b
from pcor_sql.sqltext.quoting import quote_literal


@pytest.fixture()
def con():
    c = duckdb.connect()
    c.execute(
        'CREATE TABLE t AS SELECT * FROM (VALUES '
        "('a', 1, 1.0), ('a', 1, 3.0), ('b', 1, 2.0), ('b', NULL, 5.0), (NULL, 2, 4.0), ('b', 2, 'nan'::DOUBLE)"
        ') v("g g", y, x)'
    )
    yield c
    c.close()


def test_select_from_clauses_in_order(con):
    sql = b.select_from(["x", b.aliased("y", "why")], "t", where="x > 1", order_by="x", limit=2)
    assert sql == 'SELECT x, y AS "why" FROM t WHERE x > 1 ORDER BY x LIMIT 2'
    assert con.execute(sql).fetchall() == [(2.0, 1), (3.0, 1)]
    grouped = b.select_from("y, count(*)", "t", group_by="ALL", order_by="ALL")
    assert con.execute(grouped).fetchall() == [(1, 3), (2, 2), (None, 1)]
    assert con.execute(b.select_from("*", "t", limit=0)).fetchall() == []
    with pytest.raises(InternalError):
        b.select_from([], "t")


def test_describe_and_quoted(con):
    rows = con.execute(b.describe(b.select_from(b.quoted(["g g", "x"]), "t"))).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("g g", "VARCHAR"), ("x", "DOUBLE")]


def test_as_double_and_metric_values(con):
    sql = b.metric_values("y", "t", "y = 2")
    assert sql == "SELECT CAST(y AS DOUBLE) AS m FROM t WHERE y = 2"
    assert con.execute(sql).fetchnumpy()[b.METRIC_ALIAS].tolist() == [2.0, 2.0]
    assert con.execute(b.select_from(b.as_double("1"), "t", limit=1)).fetchall() == [(1.0,)]


def test_distinct_values_skip_null_and_sort(con):
    assert con.execute(b.distinct_values("t", "g g")).fetchall() == [("a",), ("b",)]


def test_count_where_counts_each_condition(con):
    sql = b.count_where("t", ['"g g" IS NULL', "y IS NULL", "NOT isfinite(x)"])
    assert con.execute(sql).fetchall() == [(1, 1, 1)]


def test_all_not_null(con):
    sql = b.select_from("count(*)", "t", where=b.all_not_null(["g g", "y"]))
    assert con.execute(sql).fetchall() == [(4,)]


def test_group_by_cells_moments(con):
    sql = b.group_by_cells(["g g"], "x", "t")
    assert sql == (
        'SELECT "g g", system.main.count(*) AS n, system.main.count(*) FILTER (WHERE m IS NULL OR system.main.isnan(m)'
        ' OR system.main.isinf(m)) AS bad, system.main.avg(m) AS mean, system.main.var_pop(m) AS var,'
        ' system.main.min(m) AS lo, system.main.max(m) AS hi '
        'FROM (SELECT "g g", CAST(x AS DOUBLE) AS m FROM t) GROUP BY ALL'
    )
    rows = {r[0]: r[1:] for r in con.execute(sql).fetchall()}
    assert rows["a"] == (2, 0, 2.0, 1.0, 1.0, 3.0)
    assert rows["b"][:2] == (3, 1)
    assert rows[None][:3] == (1, 0, 4.0)


def test_cell_lists(con):
    sql = b.cell_lists(["g g", "y"], "x", "t")
    assert sql == 'SELECT "g g", "y", system.main.list(m) AS vs FROM (SELECT "g g", "y", CAST(x AS DOUBLE) AS m FROM t) GROUP BY ALL'
    rows = {r[:2]: r[2] for r in con.execute(sql).fetchall()}
    assert sorted(rows[("a", 1)]) == [1.0, 3.0] and rows[("b", 1)] == [2.0] and rows[(None, 2)] == [4.0]
    assert math.isnan(rows[("b", 2)][0])  # NaN (and NULL) values are listed: the caller counts them
    con.execute("CREATE TABLE u AS SELECT range % 3 AS g, hash(range) % 1000 - 500.5 AS x FROM range(5000)")
    for g, vs in con.execute(b.cell_lists(["g"], "x", "u")).fetchall():
        want = [r[0] for r in con.execute("SELECT CAST(x AS DOUBLE) FROM u WHERE g = ? ORDER BY 1", [g]).fetchall()]
        assert sorted(vs) == want


def test_parquet_file(con, tmp_path):
    path = tmp_path / "it's.parquet"
    con.execute(f"COPY ({b.select_from('*', 't')}) TO {quote_literal(str(path))} (FORMAT parquet)")
    assert con.execute(b.select_from("count(*)", b.parquet_file(path))).fetchall() == [(6,)]
