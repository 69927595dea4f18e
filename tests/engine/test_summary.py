"""The per-cell summary answers every context exactly as the plain SQL path does."""

import random

import duckdb
import numpy as np
import pytest

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import SummaryPopulation, build_summary, record_cell
from pcor_sql.errors import UserError


def make_table(con, n=3000, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    con.execute("CREATE TYPE ja AS ENUM ('n''urse', 'prof', 'cop', 'judge', 'absent')")
    con.execute("CREATE TYPE yb AS ENUM ('2019', '2020', '2021', '2022')")
    con.execute("CREATE TABLE s(id INT, job ja, year yb, emp VARCHAR, salary DOUBLE)")
    jobs = ["n'urse", "prof", "cop", "judge"]
    salary = np.round(rng.lognormal(11.6, 0.3, n), -3 if ties else 2)
    rows = [
        (i, jobs[rng.integers(0, 4)], str(2019 + rng.integers(0, 3)), f"e{rng.integers(0, 3)}", float(salary[i]))
        for i in range(n)
    ]
    con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?)", rows)
    return rows


def test_summary_population_matches_array(tmp_path):
    con = duckdb.connect()
    rows = make_table(con)
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year"])
    summary = build_summary(con, schema)
    assert summary.n_rows == len(rows)
    space = ContextSpace(schema.attributes, record_cell(schema, {"job": "prof", "year": "2020"}))
    rnd = random.Random(1)
    for _ in range(100):
        mask = space.from_free(rnd.getrandbits(len(space.free_bits)))
        sel = space.values(mask)
        vals = [r[4] for r in rows if r[1] in sel["job"] and r[2] in sel["year"]]
        ref = ArrayPopulation.of(vals, 150000.0)
        pop = SummaryPopulation.of(summary, summary.member(space, mask), 150000.0)
        assert pop.n == ref.n
        assert pop.mean == pytest.approx(ref.mean, rel=1e-12)
        assert pop.m2 == pytest.approx(ref.m2, rel=1e-9)
        assert (pop.min, pop.max) == (ref.min, ref.max)
        np.testing.assert_array_equal(pop.values(), ref.values())
        lo, hi = ref.mean - 5000, ref.mean + 5000
        np.testing.assert_array_equal(pop.between(lo, hi), ref.between(lo, hi))
        for closed in (True, False):
            assert pop.count_between(lo, hi, closed) == ref.count_between(lo, hi, closed)


def test_constant_metric_has_zero_spread():
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a', 'b')")
    con.execute("CREATE TABLE c(g k, x DOUBLE)")
    con.executemany("INSERT INTO c VALUES (?, ?)", [("a", 0.1)] * 7 + [("b", 0.1)] * 5)
    schema = resolve_schema(con, "c", "x")
    summary = build_summary(con, schema)
    space = ContextSpace(schema.attributes, (0,))
    pop = SummaryPopulation.of(summary, summary.member(space, space.full), 0.1)
    assert (pop.n, pop.m2, pop.mean) == (12, 0.0, 0.1)


class Z:
    """A minimal moment verifier for the agreement tests (the real ones are tested on their own)."""

    name = "z"
    needs_values = False

    def check(self, pop):
        return pop.n >= 2 and pop.m2 > 0 and abs(pop.v - pop.mean) / np.sqrt(pop.m2 / (pop.n - 1)) > 1.5

    def check_many(self, n, mean, m2, v):
        with np.errstate(all="ignore"):
            return (n >= 2) & (m2 > 0) & (np.abs(v - mean) / np.sqrt(m2 / (n - 1)) > 1.5)


def test_fast_and_plain_paths_agree_and_coe_vectorized_equals_one_by_one():
    con = duckdb.connect()
    make_table(con, n=800)
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year"])
    summary = build_summary(con, schema)
    v = float(con.execute("SELECT max(salary) FROM s").fetchall()[0][0])
    space = ContextSpace(schema.attributes, record_cell(schema, {"job": "cop", "year": "2021"}))
    fast = Evaluator(con, summary, space, v, Z())
    plain = Evaluator(con, summary, space, v, Z(), plain=True)
    for w in range(space.n_admissible):
        mask = space.from_free(w)
        assert fast.is_valid(mask) == plain.is_valid(mask)
        assert fast.utility(mask) == plain.utility(mask)
    masks_v, util_v = fast.coe(1 << 20)
    masks_p, util_p = plain.coe(1 << 20)
    assert [int(m) for m in masks_v] == [int(m) for m in masks_p]
    np.testing.assert_array_equal(util_v, util_p)
    assert len(masks_v) > 0


def test_coe_size_guard():
    con = duckdb.connect()
    make_table(con, n=50)
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year"])
    summary = build_summary(con, schema)
    space = ContextSpace(schema.attributes, (0, 0))
    with pytest.raises(UserError, match="admissible contexts"):
        Evaluator(con, summary, space, 1.0, Z()).coe(max_admissible=10)


@pytest.mark.parametrize(
    "setup, metric, by, match",
    [
        ("CREATE TABLE t AS SELECT 'a'::k AS g, NULL::DOUBLE AS x", "x", None, "NULL, NaN or infinite"),
        ("CREATE TABLE t AS SELECT 'a'::k AS g, 'nan'::DOUBLE AS x", "x", None, "NULL, NaN or infinite"),
        ("CREATE TABLE t AS SELECT 'a'::k AS g, 'inf'::DOUBLE AS x", "x", None, "NULL, NaN or infinite"),
        ("CREATE TABLE t AS SELECT 'a'::k AS g, 'text' AS x", "x", None, "not a number"),
        ("CREATE TABLE t AS SELECT 'a'::k AS g, 1.0 AS x", "x", ["nope"], "unknown column"),
        ("CREATE TABLE t AS SELECT 'a'::k AS g, 1.0 AS x", "nope", None, "nope"),
        ("CREATE TABLE t AS SELECT 'a' AS g, 1.0 AS x", "x", None, "no context attributes"),
    ],
)
def test_bad_input_is_a_user_error(setup, metric, by, match):
    con = duckdb.connect()
    con.execute("CREATE TYPE k AS ENUM ('a', 'b')")
    con.execute(setup)
    with pytest.raises(UserError, match=match):
        build_summary(con, resolve_schema(con, "t", metric, by=by))


def test_value_outside_declared_domain_is_an_error():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1.0), ('zz', 2.0)) v(g, x)")
    schema = resolve_schema(con, "t", "x", domains={"g": ["a", "b"]})
    with pytest.raises(UserError, match="outside its declared domain"):
        build_summary(con, schema)


def test_data_derived_domain_warns_what_leaks():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1.0), ('b', 2.0)) v(g, x)")
    seen = []
    schema = resolve_schema(con, "t", "x", by=["g"], warn=seen.append)
    assert schema.derived == ("g",)
    assert len(seen) == 1 and "reveals which g values exist" in seen[0]


def test_typed_declared_domain_and_record_outside_it():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (2019, 1.0), (2020, 2.0), (NULL, 3.0)) v(y, x)")
    schema = resolve_schema(con, "t", "x", domains={"y": ["2019", "2020", "2021"]})
    assert schema.attributes[0].domain == (2019, 2020, 2021)
    assert build_summary(con, schema).n_rows == 2  # the NULL row is in no population
    with pytest.raises(UserError, match="NULL y"):
        record_cell(schema, {"y": None})
    with pytest.raises(UserError, match="not a valid INTEGER"):
        resolve_schema(con, "t", "x", domains={"y": ["twenty"]})


def test_declared_domain_narrower_than_the_enum_type_reads_sorted_values():
    # The ENUM type has labels the declared domain leaves out (and no row uses): the sorted
    # index used by LOF and histogram must not trip over them.
    con = duckdb.connect()
    con.execute("CREATE TYPE wide AS ENUM ('a', 'b', 'unused')")
    con.execute("CREATE TABLE w(g wide, x DOUBLE)")
    con.executemany("INSERT INTO w VALUES (?, ?)", [("a", 1.0), ("b", 2.0), ("a", 3.0)])
    schema = resolve_schema(con, "w", "x", domains={"g": ["a", "b"]})
    summary = build_summary(con, schema)
    runs = summary.runs()
    assert sorted(runs.values.tolist()) == [1.0, 2.0, 3.0] and runs.n_cells == 2
