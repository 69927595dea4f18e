"""Ordinal attributes in SQL (engine.context_sql, engine.schema): the released range over the raw
column, the label form over the binned relation, and the binned relation's CASE — each run
on DuckDB against bin membership computed in Python."""

from __future__ import annotations

import math

import duckdb
import pytest

from pcor_sql.core.bins import bin_of
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.engine.schema import OUTSIDE_BINS, binned_relation

INF = math.inf


def run_mask(space, i, first, last, rest=None):
    """The context with bins first..last on attribute i (others full)."""
    labels = space.attributes[i].domain
    return space.from_values({space.attributes[i].name: labels[first:last + 1], **(rest or {})})


@pytest.mark.parametrize(
    "edges, anchor, first, last, expected",
    [
        ((18, 25, 35, 81), 1, 1, 1, '"age" >= 25 AND "age" < 35'),
        ((18, 25, 35, 81), 1, 0, 1, '"age" >= 18 AND "age" < 35'),
        ((18, 25, 35, 81), 1, 1, 2, '"age" >= 25 AND "age" <= 81'),  # the last bin is closed
        ((-INF, 30, 40, INF), 1, 0, 1, '"age" < 40'),  # −inf: no lower side
        ((-INF, 30, 40, INF), 1, 1, 2, '"age" >= 30'),  # +inf: no upper side
        ((0.5, 2.5, 4.0), 0, 0, 0, '"age" >= 0.5 AND "age" < 2.5'),
    ],
)
def test_a_run_of_bins_is_one_range(edges, anchor, first, last, expected):
    space = ContextSpace([Attribute.binned("age", edges), Attribute("dept", ("a", "b"))], [anchor, 0])
    mask = run_mask(space, 0, first, last, {"dept": ["a"]})
    assert context_predicate(space, mask) == f"{expected} AND \"dept\" = 'a'"


def test_a_full_run_is_a_full_domain():
    space = ContextSpace([Attribute.binned("age", (18, 25, 81))], [0])
    assert context_predicate(space, space.full) == '"age" IS NOT NULL'
    assert context_predicate(space, space.full, not_null=frozenset({"age"})) == "TRUE"


def test_the_internal_form_lists_labels():
    space = ContextSpace([Attribute.binned("age", (18, 25, 35, 81))], [1])
    mask = run_mask(space, 0, 0, 1)
    assert context_predicate(space, mask, omit_full=False) == "\"age\" IN ('[18, 25)', '[25, 35)')"
    assert context_predicate(space, mask, omit_full=False, ranges=True) == '"age" >= 18 AND "age" < 35'


@pytest.mark.parametrize("edges", [(18, 25, 35, 81), (-INF, 30, 40, INF), (18.0, 30.5, 80.0)])
def test_ranges_and_the_binned_relation_agree_with_bin_membership_on_duckdb(edges):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, age DOUBLE, x DOUBLE)")
    ages = [None, 17.0, 18.0, 24.9, 25.0, 30.0, 30.5, 39.0, 40.0, 64.0, 80.0, 81.0, 82.0, float("nan")]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, a, float(i)) for i, a in enumerate(ages)])
    attr = Attribute.binned("age", edges)
    relation, metric = binned_relation("t", "x", [attr])
    assert metric == '"x"'
    labels = dict(con.execute(f"SELECT {metric}, age FROM {relation}").fetchall())
    for i, a in enumerate(ages):
        j = None if a is None else bin_of(edges, a)
        assert labels[float(i)] == (None if a is None else OUTSIDE_BINS if j is None else attr.domain[j]), a
    # the released ranges, on rows whose values are inside the edges (others are an input error)
    con.execute("DELETE FROM t WHERE age IS NOT NULL AND (isnan(age) OR age < $1 OR age > $2)", [edges[0], edges[-1]])
    inside = [i for i, a in enumerate(ages) if a is not None and bin_of(edges, a) is not None]
    for first in range(len(attr.domain)):
        for last in range(first, len(attr.domain)):
            space = ContextSpace([attr], [first])
            where = context_predicate(space, run_mask(space, 0, first, last))
            got = sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall())
            assert got == [i for i in inside if first <= bin_of(edges, ages[i]) <= last], where
    con.close()


def test_the_binned_relation_keeps_qualified_metric_references():
    con = duckdb.connect()
    con.execute("CREATE TABLE s (age INTEGER, pay DOUBLE)")
    con.execute("INSERT INTO s VALUES (20, 1.0), (30, 2.0)")
    relation, metric = binned_relation("s AS q", "q.pay", [Attribute.binned("age", (18, 25, 35))])
    assert metric == '"q.pay"'
    assert con.execute(f"SELECT {metric}, age FROM {relation} ORDER BY 1").fetchall() == [(1.0, "[18, 25)"), (2.0, "[25, 35]")]
    con.close()
