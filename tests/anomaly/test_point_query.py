"""IDENTIFY ANOMALY VALUE: the counts of a point of the metric space (in the data or not), its
answer's law, and its privacy on every small edge — through the code the service runs
(`load_values` → `point_ball_counts` → `prepare_point_query`)."""

from __future__ import annotations

import itertools
import math

import duckdb
import numpy as np
import pytest

from pcor_sql.anomaly import mechanisms as mech
from pcor_sql.anomaly.batch import prepare_point_query
from pcor_sql.anomaly.points import load_values, point_ball_counts
from pcor_sql.errors import UserError
from tests.anomaly.brute import brute_force


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_point_counts_match_brute_force_for_present_and_absent_points(norm):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 6, size=(300, 2)).astype(np.float64) * 0.5
    points = [data[0], data[17], np.array([0.25, 1.75]), np.array([100.0, -3.0]), np.array([1.0, 1.0])]
    for point in points:
        counted = point_ball_counts(data, point, 0.75, norm)
        mult, ball = brute_force(data, [point], 0.75, norm)
        assert (counted.multiplicity.tolist(), counted.ball.tolist()) == (mult.tolist(), ball.tolist())


def test_load_values_reads_every_row_and_refuses_bad_columns():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, (i % 7)::INTEGER AS a, -0.0 AS z, 'x' AS s FROM range(50) r(i)")
    values = load_values(con, "t", ["a", "z"])
    assert values.shape == (50, 2) and sorted(set(values[:, 0])) == list(range(7))
    assert not np.signbit(values[:, 1]).any()  # −0.0 read as 0.0, so it equals a point 0
    with pytest.raises(UserError, match="not a number"):
        load_values(con, "t", ["s"])
    con.execute("INSERT INTO t VALUES (99, NULL, 0, 'y')")
    with pytest.raises(UserError, match="NULL"):
        load_values(con, "t", ["a"])


def _batch(data, point, **kw):
    counted = point_ball_counts(np.asarray(data, dtype=np.float64).reshape(-1, 1), [point], kw["radius"], "l2")
    return prepare_point_query({"v": point}, counted, norm="l2", **kw)


@pytest.mark.parametrize("point, ball", [(50.0, 0), (3.0, 4), (2.5, 2)])
def test_the_answer_law_for_an_absent_point_is_construction_1(point, ball):
    """Seeded: 200,000 answers for a point no record equals; the rate of 1s is the flip
    probability of Δ_G (x_i = 0: 1 if B < β, else 2 + B − β), within Hoeffding's bound at δ = 1e-6."""
    data = [1, 2, 2, 4, 4, 5, 9, 9]  # within 1 of 3: 2, 2, 4, 4; of 2.5: 2, 2; of 50: none
    beta, eps = 3, 0.4
    batch = _batch(data, point, beta=beta, radius=1.0, epsilon=eps, privacy="dp", k=None)
    b = int(batch.ball[0])
    assert b == ball
    assert int(batch.multiplicity[0]) == 0 and not batch.truth[0]
    assert b == brute_force(np.asarray(data, float).reshape(-1, 1), [[point]], 1.0, "l2")[1][0]
    lam = 1 if b < beta else 2 + b - beta
    p = math.exp(-eps * (lam - 1)) / (1 + math.exp(eps))
    assert float(batch.flip_probability[0]) == pytest.approx(p, rel=1e-12)
    n = 200_000
    rng = np.random.default_rng(20240519)
    ones = np.count_nonzero(mech.construction1(np.repeat(batch.truth, n), np.repeat(batch.flip_probability, n), rng))
    assert abs(ones / n - p) <= math.sqrt(math.log(2 / 1e-6) / (2 * n))
    # And one answer through the batch (the service's call) is a plain bool for the point.
    [answer] = batch.answer(np.random.default_rng(1))
    assert answer.record == {"v": point} and answer.multiplicity == 0 and type(answer.anomaly) is bool


def _law(data, point, beta, eps, privacy, k):
    batch = _batch(data, point, beta=beta, radius=1.0, epsilon=eps, privacy=privacy, k=k)
    p = float(batch.flip_probability[0])
    return (1.0 - p) if batch.truth[0] else p  # P(answer = 1)


UNIVERSE = (0.0, 1.0, 2.0, 3.0)


@pytest.mark.parametrize("privacy, k", [("dp", None), ("sp", 1), ("sp", 2)])
def test_every_small_edge_keeps_the_ratio_for_points_present_or_absent(privacy, k):
    """Every dataset of ≤ 3 records on {0, 1, 2, 3}, every point (on the grid, between it, far
    away), every neighbour by one added record (on the k-sensitive graph for sp: the value added
    is sensitive in the larger dataset): P(answer) ratios ≤ e^ε both ways, for both outputs."""
    beta, eps = 2, 0.8
    bound = math.exp(eps) * (1 + 1e-12)
    points = (*UNIVERSE, 1.5, 40.0)
    checked = 0
    for size in range(4):
        for data in itertools.combinations_with_replacement(UNIVERSE, size):
            for added in UNIVERSE:
                bigger = sorted((*data, added))
                if k is not None:
                    near = sum(abs(added - v) <= 1.0 for v in bigger)
                    if near < beta + 1 - k:
                        continue  # not an edge of the k-sensitive graph
                for point in points:
                    q1 = _law(list(data), point, beta, eps, privacy, k)
                    q2 = _law(bigger, point, beta, eps, privacy, k)
                    for a, c in ((q1, q2), (q2, q1), (1 - q1, 1 - q2), (1 - q2, 1 - q1)):
                        assert a <= bound * c, (privacy, k, data, added, point)
                    checked += 1
    assert checked > 300
