"""Z-score: the definition, the vectorized form, and the SQL aggregate run in DuckDB."""

import math

import numpy as np
import pytest

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.zscore import ZScore, zscore_check_many
from pcor_sql.errors import UserError


def test_definition_on_random_data():
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(2, 50))
        x = np.round(rng.normal(size=n) * 10, int(rng.integers(0, 3)))
        x[0] += rng.uniform(0, 60)
        v = float(x[int(rng.integers(n))])
        z = float(rng.choice([1.0, 2.0, 3.0]))
        s = x.std(ddof=1)
        if s == 0:
            continue
        score = abs(v - x.mean()) / s
        if abs(score - z) > 1e-9:
            assert ZScore(z).check(ArrayPopulation.of(x, v)) == (score > z)
            assert ZScore(z).score(ArrayPopulation.of(x, v)) == pytest.approx(score, rel=1e-12)


def test_vectorized_equals_scalar():
    rng = np.random.default_rng(4)
    n = rng.integers(1, 100, size=2000)
    mean = rng.normal(size=n.size)
    m2 = rng.exponential(size=n.size) * np.maximum(n - 1, 0)
    m2[:100] = 0.0
    v = mean + rng.normal(scale=4, size=n.size)

    class Moments:
        pass

    scalar = []
    for i in range(n.size):
        pop = Moments()
        pop.n, pop.mean, pop.m2, pop.v = int(n[i]), float(mean[i]), float(m2[i]), float(v[i])
        scalar.append(ZScore(2.5).check(pop))
    assert zscore_check_many(n, mean, m2, v, 2.5).tolist() == scalar
    assert ZScore(2.5).check_many(n.astype(float), mean, m2, v).tolist() == scalar
    assert any(scalar) and not all(scalar)


def test_sql_aggregate_agrees_in_duckdb():
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(8)
    con = duckdb.connect()
    try:
        checked = 0
        for case in range(60):
            n = int(rng.integers(1, 40))
            x = np.round(rng.normal(size=n) * 5, 1)
            if case % 7 == 0:
                x[:] = x[0]  # constant population: stddev 0, never an outlier
            x[0] += rng.uniform(0, 30) if case % 7 else 0.0
            v = float(x[int(rng.integers(n))])
            zs = ZScore(z=float(rng.choice([0.5, 1.5, 3.0])))
            pop = ArrayPopulation.of(x, v)
            if pop.m2 > 0 and abs(zs.score(pop) - zs.z) < 1e-9:
                continue  # too close to the boundary for two summation orders to agree
            con.register("pop", {"m": x})
            expr = zs.sql('"m"', "$1")
            (got,) = con.execute(f"SELECT {expr} FROM pop", [v]).fetchall()[0]
            con.unregister("pop")
            assert got is zs.check(pop), (x, v, expr)
            checked += 1
        assert checked > 40
        assert zs.sql_expression("m", "?") == zs.sql("m", "?")
    finally:
        con.close()


def test_sql_renders_z_exactly():
    assert "CAST(3.0 AS DOUBLE)" in ZScore().sql("m", "$1")
    z = 2.0000000000000004
    assert f"CAST({z!r} AS DOUBLE)" in ZScore(z).sql("m", "$1")


def test_tiny_and_constant():
    assert not ZScore().check(ArrayPopulation.of([5.0], 5.0))
    assert math.isnan(ZScore().score(ArrayPopulation.of([5.0], 5.0)))
    assert not ZScore(0.5).check(ArrayPopulation.of([2.0, 2.0], 2.0))
    assert ZScore(0.5).check(ArrayPopulation.of([0.0, 1.0], 1.0))  # |1 − .5|/.7071 = .707 > .5
    assert not ZScore(0.8).check(ArrayPopulation.of([0.0, 1.0], 1.0))


@pytest.mark.parametrize("z", [0, -1, float("inf"), "3", None])
def test_bad_z_is_a_user_error(z):
    with pytest.raises(UserError, match="z="):
        ZScore(z)
