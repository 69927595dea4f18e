"""prepare_anomaly_queries, then AnomalyBatch.answer: the DuckDB path the public API takes
(`jobs.AnswerJob` charges the ledger between the two)."""

from __future__ import annotations

import statistics
import time

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pcor_sql.anomaly import mechanisms as mech
from pcor_sql.anomaly.batch import AnomalyAnswer, prepare_anomaly_queries
from pcor_sql.core.randomness import SecureRandom
from pcor_sql.errors import UserError

KW = dict(beta=5, radius=1.0, epsilon=0.5, privacy="sp", k=1, norm="l2")


def answer_queries(con, relation_sql, columns, selector_sql, *, source, **params) -> list[AnomalyAnswer]:
    return prepare_anomaly_queries(con, relation_sql, columns, selector_sql, **params).answer(source)


@pytest.fixture()
def con():
    c = duckdb.connect()
    # A dense cluster 0..9 (ten copies each), a pair at 50, one isolated record at 100.
    ages = [a for a in range(10) for _ in range(10)] + [50, 50, 100]
    c.execute("CREATE TABLE people AS SELECT row_number() OVER () AS id, a::INTEGER AS age, "
              "(a * 2.5)::DOUBLE AS score, 'x' AS name FROM unnest($1) t(a)", [ages])
    yield c
    c.close()


def test_answers_selected_records_with_owner_fields(con):
    answers = answer_queries(con, "people", ["age"], "age >= 50", source=np.random.default_rng(3), **KW)
    # The record is the whole selected row, so an answer can be matched to its record by id.
    assert [a.record for a in answers] == [
        {"id": 101, "age": 50, "score": 125.0, "name": "x"},
        {"id": 102, "age": 50, "score": 125.0, "name": "x"},
        {"id": 103, "age": 100, "score": 250.0, "name": "x"},
    ]
    assert all(isinstance(a, AnomalyAnswer) and a.privacy == "sp" and a.k == 1 and a.epsilon == 0.5 for a in answers)
    assert [(a.multiplicity, a.ball_count, a.true_answer) for a in answers] == [(2, 2, True), (2, 2, True), (1, 1, True)]
    # λ_1 = β + 1 − B for non-sensitive records (B < β): 4, 4, 5; p from the formula.
    assert [a.lambda_ for a in answers] == [4, 4, 5]
    for a in answers:
        assert a.flip_probability == pytest.approx(np.exp(-0.5 * (a.lambda_ - 1)) / (1 + np.exp(0.5)), rel=1e-12)


def test_same_seed_same_answers_and_the_bit_is_truth_xor_flip(con):
    # Seed 9 flips one answer (most flip probabilities here are < 0.1), so the check below sees a flip.
    first = answer_queries(con, "people", ["age"], None, source=np.random.default_rng(9), **KW)
    again = answer_queries(con, "people", ["age"], None, source=np.random.default_rng(9), **KW)
    assert [a.anomaly for a in first] == [a.anomaly for a in again]
    # One exact coin per answer, in order: the first 64-bit word W flips iff W < ⌊p·2⁶⁴⌋ (a tie,
    # W = ⌊p·2⁶⁴⌋, would read on; it has probability 2⁻⁶⁴ and does not happen here).
    words = np.random.default_rng(9).bit_generator.random_raw(len(first)).tolist()
    cuts = [int(np.floor(np.ldexp(a.flip_probability, 64))) for a in first]
    assert all(w != c for w, c in zip(words, cuts))
    expected = [a.true_answer ^ (w < c) for a, w, c in zip(first, words, cuts)]
    assert [a.anomaly for a in first] == expected
    assert any(a.anomaly != a.true_answer for a in first)  # the check sees flips, not only truths
    assert len(first) == 103


def test_dp_mode_uses_delta_g_and_reports_no_k(con):
    answers = answer_queries(con, "people", ["age"], "age = 100", source=SecureRandom(), **(KW | {"privacy": "dp"}))
    (a,) = answers
    assert a.k is None and a.privacy == "dp" and a.lambda_ == 1  # Δ_G = min(x_i, β+1−B) = 1


def test_several_columns_and_norms(con):
    for norm in ("l1", "l2", "linf"):
        batch = prepare_anomaly_queries(con, "people", ["age", "score"], "id <= 3", **(KW | {"norm": norm, "radius": 2.0}))
        pts = batch.points.values
        for row, b in zip(pts[batch.points.selected], batch.ball):
            diff = np.abs(pts - row)
            dist = {"l1": diff[:, 0] + diff[:, 1], "l2": np.sqrt(diff[:, 0] ** 2 + diff[:, 1] ** 2), "linf": diff.max(1)}[norm]
            assert b == np.count_nonzero(dist <= 2.0)


def test_cost_is_charged_per_answer(con):
    batch = prepare_anomaly_queries(con, "people", ["age"], "age < 2", **KW)
    assert batch.size == 20 and batch.cost.epsilon_total == pytest.approx(10.0)
    assert "sensitive privacy" in batch.cost.guarantee


@pytest.mark.parametrize(
    "columns,selector,overrides,needle",
    [
        (["age"], None, {"beta": 0.5}, "beta"),
        (["age"], None, {"radius": -1}, "radius"),
        (["age"], None, {"epsilon": 0}, "epsilon"),
        (["age"], None, {"epsilon": -1}, "epsilon"),
        (["age"], None, {"k": 0}, "k must be"),
        (["age"], None, {"k": 7}, "k must be"),
        (["age"], None, {"norm": "cosine"}, "norm"),
        (["age"], None, {"privacy": "ldp"}, "privacy"),
        (["name"], None, {}, "'name' has type VARCHAR"),
        (["age"], "age > 1000", {}, "matches no rows"),
        (["missing"], None, {}, "cannot read columns"),
    ],
)
def test_bad_input_is_a_user_error(con, columns, selector, overrides, needle):
    with pytest.raises(UserError) as err:
        answer_queries(con, "people", columns, selector, source=np.random.default_rng(0), **(KW | overrides))
    assert needle in str(err.value) and " — " in str(err.value)


def test_nulls_and_nans_are_named(con):
    con.execute("CREATE TABLE holes AS SELECT * FROM (VALUES (1, 1.0), (2, NULL), (3, 'nan'::DOUBLE)) t(id, v)")
    with pytest.raises(UserError, match="'v' has 1 NULL value.*WHERE \"v\" IS NOT NULL"):
        answer_queries(con, "holes", ["v"], None, source=np.random.default_rng(0), **KW)
    with pytest.raises(UserError, match="'v' has 1 NaN"):
        answer_queries(con, "(SELECT * FROM holes WHERE v IS NOT NULL)", ["v"], None, source=np.random.default_rng(0), **KW)


def test_batch_over_every_row_of_110k_takes_seconds(con):
    """Batch identification over a homicides-sized table (110k integer ages): median of 3 < 10 s."""
    rng = np.random.default_rng(0)
    ages = np.clip(rng.normal(33, 15, 110_000).round(), 0, 99).astype(np.int32)
    con.register("ages_src", pa.table({"victim_age": ages}))
    con.execute("CREATE TABLE victims AS SELECT * FROM ages_src")
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        answers = answer_queries(con, "victims", ["victim_age"], None, source=np.random.default_rng(1),
                                         **(KW | {"beta": 50, "radius": 1}))
        times.append(time.perf_counter() - t0)
    assert len(answers) == 110_000
    assert statistics.median(times) < 10.0, times
    truth = mech.anomaly_truth([a.multiplicity for a in answers[:10]], [a.ball_count for a in answers[:10]], 50)
    assert truth.tolist() == [a.true_answer for a in answers[:10]]
