"""The evidence table: exact expected error rates of the DP and SP mechanisms over all records."""

from __future__ import annotations

import math
import time

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pcor_sql.anomaly import mechanisms as core
from benchmarks.anomaly_evidence import anomaly_error_table
from pcor_sql.errors import UserError


@pytest.fixture()
def con():
    """A salary-like column: a dense body and a sparse tail of isolated values (x_i = 1)."""
    c = duckdb.connect()
    rng = np.random.default_rng(2024)
    body = rng.normal(80_000, 8_000, 20_000).round(2)
    tail = rng.uniform(150_000, 400_000, 300).round(2)
    c.register("src", pa.table({"salary": np.concatenate([body, tail]), "grade": rng.integers(0, 30, 20_300)}))
    c.execute("CREATE TABLE pay AS SELECT * FROM src")
    c.unregister("src")
    yield c
    c.close()


def _brute_balls(values: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: every distinct value's ball count by a scan of all distinct values."""
    uniq, counts = np.unique(values, return_counts=True)
    return counts, np.array([counts[np.abs(uniq - v) <= r].sum() for v in uniq])


def _reference(balls: tuple[np.ndarray, np.ndarray], beta: int, eps: float, k: int) -> dict[str, float]:
    counts, ball = balls
    truth = core.anomaly_truth(counts, ball, beta)
    p_dp = core.flip_probability(core.mdd_dp(counts, ball, beta), eps)
    p_sp = core.flip_probability(core.lambda_k(counts, ball, beta, k), eps)
    w = counts.astype(float)
    return {
        "dp_error_anomalies": float((p_dp * w)[truth].sum() / w[truth].sum()),
        "sp_error_anomalies": float((p_sp * w)[truth].sum() / w[truth].sum()),
        "dp_error_overall": float((p_dp * w).sum() / w.sum()),
        "sp_error_overall": float((p_sp * w).sum() / w.sum()),
        "anomalies": int(w[truth].sum()),
    }


def test_rates_match_a_brute_force_reference(con):
    values = np.array([v for (v,) in con.execute("SELECT salary FROM pay").fetchall()])
    rows = anomaly_error_table(con, "pay", ["salary"], epsilons=[0.2, 1.0], betas=[5, 20.5], radii=[0, 2000], ks=[1, 4])
    assert len(rows) == 2 * 2 * 2 * 2
    balls = {r: _brute_balls(values, r) for r in (0, 2000)}
    for row in rows:
        ref = _reference(balls[row.radius], int(math.floor(row.beta)), row.epsilon, row.k)
        assert row.records == values.size and row.anomalies == ref["anomalies"]
        for key in ("dp_error_anomalies", "sp_error_anomalies", "dp_error_overall", "sp_error_overall"):
            assert getattr(row, key) == pytest.approx(ref[key], rel=1e-9, abs=1e-300), (row, key)


def test_central_claim_sp_far_below_dp_on_true_anomalies(con):
    rows = anomaly_error_table(con, "pay", ["salary"], epsilons=[0.5, 1.0], betas=[20], radii=[2000], ks=[1])
    for row in rows:
        assert row.anomalies >= 100
        assert row.sp_error_anomalies < row.dp_error_anomalies / 5, row
        # Non-anomalies are sensitive for every k (B ≥ β + 1): both mechanisms coincide there.
        assert row.sp_error_normal == pytest.approx(row.dp_error_normal, rel=1e-12)


def test_sp_never_errs_more_than_dp(con):
    """λ_k ≥ Δ_G for every record (so p_sp ≤ p_dp): on every group, for every k."""
    rows = anomaly_error_table(con, "pay", ["salary", "grade"], epsilons=[0.1, 2.0], betas=[3, 10], radii=[500, 5000], ks=[1, 2, 4, 11], norm="l1")
    assert rows
    for row in rows:
        assert row.sp_error_overall <= row.dp_error_overall * (1 + 1e-12)
        if row.anomalies:
            assert row.sp_error_anomalies <= row.dp_error_anomalies * (1 + 1e-12)
    # k > β + 1 does not exist for that β and is skipped
    assert {(r.beta, r.k) for r in rows if r.k == 11} == {(10.0, 11)}


def test_simulation_agrees_with_the_exact_rates(con):
    """Seeded: realised rates within a Hoeffding bound (δ = 1e-6) of the exact expectations."""
    trials = 20
    (row,) = anomaly_error_table(con, "pay", ["salary"], epsilons=[0.5], betas=[20], radii=[2000], ks=[1],
                                 simulation_trials=trials, seed=5)
    for exact, sim, n in (
        (row.dp_error_overall, row.sim_dp_error_overall, row.records * trials),
        (row.sp_error_overall, row.sim_sp_error_overall, row.records * trials),
        (row.dp_error_anomalies, row.sim_dp_error_anomalies, row.anomalies * trials),
        (row.sp_error_anomalies, row.sim_sp_error_anomalies, row.anomalies * trials),
    ):
        assert abs(sim - exact) <= math.sqrt(math.log(2 / 1e-6) / (2 * n))
    again = anomaly_error_table(con, "pay", ["salary"], epsilons=[0.5], betas=[20], radii=[2000], ks=[1],
                                simulation_trials=trials, seed=5)
    assert again[0] == row


def test_bad_grids_are_user_errors(con):
    ok = dict(epsilons=[0.5], betas=[5], radii=[1.0], ks=[1])
    for bad, needle in (
        ({"epsilons": []}, "epsilons"),
        ({"epsilons": [0]}, "epsilon"),
        ({"betas": [0]}, "beta"),
        ({"radii": [-1]}, "radius"),
        ({"ks": [0]}, "k"),
        ({"norm": "l7"}, "norm"),
        ({"simulation_trials": 3}, "seed"),
    ):
        with pytest.raises(UserError, match=needle):
            anomaly_error_table(con, "pay", ["salary"], **(ok | bad))


def test_runs_in_seconds_at_110k_rows():
    con = duckdb.connect()
    rng = np.random.default_rng(1)
    con.register("src", pa.table({"victim_age": np.clip(rng.normal(33, 15, 110_000).round(), 0, 99).astype(np.int32)}))
    t0 = time.perf_counter()
    rows = anomaly_error_table(con, "src", ["victim_age"], epsilons=[0.1, 0.5, 1.0], betas=[20, 50], radii=[0, 1, 2], ks=[1, 5])
    elapsed = time.perf_counter() - t0
    con.close()
    assert len(rows) == 36 and elapsed < 10.0
