"""The evaluator's sizes: V's own cell read off the coordinates equals the summary's membership
and the plain path's count, for every cell of a table (records in each)."""

import itertools

import duckdb

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary, record_cell
from tests.engine.test_summary import make_table


def test_own_cell_size_is_the_members_count_in_every_cell():
    con = duckdb.connect()
    make_table(con, n=600, seed=4)
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year", "emp"])
    summary = build_summary(con, schema)
    cells = con.execute("SELECT DISTINCT job::VARCHAR, year::VARCHAR, emp FROM s").fetchall()
    assert len(cells) > 20
    for job, year, emp in cells:
        space = ContextSpace(schema.attributes, record_cell(schema, {"job": job, "year": year, "emp": emp}))
        ev = Evaluator(con, summary, space, 1.0, ZScore())
        plain = Evaluator(con, summary, space, 1.0, ZScore(), plain=True)
        members = int(summary.count[summary.member(space, space.v_mask)].sum())
        assert ev.population_size(space.v_mask) == members == plain.population_size(space.v_mask) > 0
        # Any other context still goes through the summary's membership.
        other = space.v_mask | space._free_values[0]
        assert ev.population_size(other) == int(summary.count[summary.member(space, other)].sum())


def test_own_cell_size_where_an_attribute_has_one_value():
    con = duckdb.connect()
    con.execute("CREATE TYPE one AS ENUM ('only')")
    con.execute("CREATE TABLE t(a one, b VARCHAR, v DOUBLE)")
    con.executemany("INSERT INTO t VALUES ('only', ?, ?)",
                    [(b, float(i)) for i, b in zip(range(40), itertools.cycle("xyz"))])
    schema = resolve_schema(con, "t", '"v"', by=["a", "b"])
    summary = build_summary(con, schema)
    for b in "xyz":
        space = ContextSpace(schema.attributes, record_cell(schema, {"a": "only", "b": b}))
        ev = Evaluator(con, summary, space, 1.0, ZScore())
        assert ev.population_size(space.v_mask) == int(summary.count[summary.member(space, space.v_mask)].sum())
