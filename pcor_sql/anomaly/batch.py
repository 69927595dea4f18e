"""Answer (β, r)-anomaly identification queries on a DuckDB relation (DESIGN.md §3).

`prepare_anomaly_queries` validates the parameters and the data and computes every selected
record's ball count — nothing random yet, so the caller can charge the budget ledger with
`batch.cost` (n answers × ε, sequential composition) before any answer exists.
`AnomalyBatch.answer(source)` then draws Construction 1 for each record with independent coins
(`jobs.AnswerJob` runs both, with the reservation between them).

Privacy: each answer is ε-DP (privacy="dp", λ = Δ_G, pareto optimal) or (ε, k)-sensitively
private (privacy="sp", λ = λ_k) — proofs in `pcor_sql.anomaly.mechanisms`. The noisy `anomaly` bit is
the release; `true_answer`, `ball_count`, `multiplicity`, `lambda_` and `flip_probability` are
the owner's private diagnostics and must not be released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import duckdb
import numpy as np

from pcor_sql.anomaly import mechanisms as mech
from pcor_sql.anomaly.balls import BallCounts
from pcor_sql.anomaly.points import PointData, load_points, relation_ball_counts
from pcor_sql.core.randomness import Source
from pcor_sql.errors import InternalError


@dataclass(frozen=True)
class AnomalyAnswer:
    """One answered record. Releasable: record, anomaly, epsilon, privacy, k (None for dp).
    Owner-only (not for release): true_answer, ball_count, multiplicity, lambda_, flip_probability."""

    record: dict[str, Any]
    anomaly: bool
    epsilon: float
    privacy: str
    k: int | None
    true_answer: bool
    ball_count: int
    multiplicity: int
    lambda_: int
    flip_probability: float


@dataclass(frozen=True)
class AnomalyBatch:
    """Everything but the coins: validated parameters and per-record exact quantities.
    `points` holds every row's values when they were read locally (None when an engine counted)."""

    params: mech.AnomalyParams
    norm: str
    points: PointData | None
    records: tuple[dict[str, Any], ...]
    multiplicity: np.ndarray
    ball: np.ndarray
    truth: np.ndarray
    lam: np.ndarray
    flip_probability: np.ndarray

    @property
    def size(self) -> int:
        return len(self.records)

    @property
    def cost(self) -> mech.AnomalyCost:
        """What answering the whole batch costs (charge it before answering)."""
        return mech.anomaly_privacy_cost(self.params.epsilon, self.size, self.params.privacy, self.params.k)

    def answer(self, source: Source) -> list[AnomalyAnswer]:
        """Construction 1 for every selected record, one independent uniform each from `source`."""
        noisy = mech.construction1(self.truth, self.flip_probability, source)
        p = self.params
        # Whole-array .tolist() gives Python bools/ints/floats far faster than per-element casts.
        columns = zip(
            self.records,
            noisy.tolist(),
            self.truth.tolist(),
            self.ball.tolist(),
            self.multiplicity.tolist(),
            self.lam.tolist(),
            self.flip_probability.tolist(),
        )
        return [
            AnomalyAnswer(dict(record), bit, p.epsilon, p.privacy.value, p.k, truth, ball, mult, lam, flip)
            for record, bit, truth, ball, mult, lam, flip in columns
        ]


def prepare_anomaly_queries(
    con: duckdb.DuckDBPyConnection,
    relation_sql: str,
    columns: Sequence[str],
    selector_sql: str | None,
    *,
    beta: float,
    radius: float,
    epsilon: float,
    privacy: str,
    k: int | None,
    norm: str,
    counts: Callable[..., tuple[tuple[dict[str, Any], ...], BallCounts]] | None = None,
) -> AnomalyBatch:
    """Validate and compute ball counts, g, λ and flip probabilities for the selected records.

    `relation_sql` is text usable after FROM; `columns` the numeric columns (distance: |a − b|
    for one, the named norm for several); `selector_sql` a trusted SQL boolean expression over
    the relation (None: every row). Input errors (β < 1, r < 0, ε ≤ 0, k outside 1..⌊β⌋+1 for
    sp, unknown norm or privacy mode, missing or non-numeric columns, NULL/NaN/±inf values,
    a selector matching no row) raise UserError.

    `counts(relation_sql, columns, selector_sql, radius, norm) -> (records, BallCounts)` counts
    where the rows are (an engine that does not ship them, `pcor_sql.backends`); by default
    DuckDB on `con` reads every point and numpy counts.
    """
    params = mech.validate_params(beta, radius, epsilon, privacy, k)
    return anomaly_batch(con, relation_sql, columns, selector_sql, params, norm, counts)


def anomaly_batch(
    con: duckdb.DuckDBPyConnection | None, relation_sql: str, columns: Sequence[str], selector_sql: str | None,
    params: mech.AnomalyParams, norm: str,
    counts: Callable[..., tuple[tuple[dict[str, Any], ...], BallCounts]] | None = None,
) -> AnomalyBatch:
    """`prepare_anomaly_queries` for the mechanism `params` already validated — the one object a
    request's reservation was priced by (`AnomalyParams.answer_cost`), so the mechanism that runs
    is the one that was charged for."""
    norm_name = mech.validate_norm(norm)
    points: PointData | None = None
    if counts is None:
        points = load_points(con, relation_sql, columns, selector_sql)
        records, counted = points.records, relation_ball_counts(points, params.radius, norm_name)
    else:
        records, counted = counts(relation_sql, columns, selector_sql, params.radius, norm_name)
    if np.any(counted.multiplicity < 1):
        raise InternalError("a selected record was not counted among the data")
    truth = mech.anomaly_truth(counted.multiplicity, counted.ball, params.beta)
    lam = mech.mechanism_lambda(counted.multiplicity, counted.ball, params)
    flip = mech.flip_probability(lam, params.epsilon)
    return AnomalyBatch(params, norm_name, points, records, counted.multiplicity, counted.ball, truth, lam, flip)


def prepare_point_query(
    point: dict[str, float], counted: BallCounts, *, beta: float, radius: float, epsilon: float, privacy: str,
    k: int | None, norm: str,
) -> AnomalyBatch:
    """The batch of one point i of the metric space (`IDENTIFY ANOMALY VALUE`), from its counts
    `counted` (x_i, B_x(i, r); x_i = 0 when no record equals it). Nothing else differs from a
    record's answer: g(i, x) = 0 whenever x_i = 0, and Δ_G and λ_k cover x_i = 0 (DESIGN.md §3),
    so Construction 1 is ε-DP / (ε, k)-SP for present and absent points alike (proof in
    `pcor_sql.anomaly.mechanisms`: it holds for every i of the universe)."""
    return point_batch(point, counted, mech.validate_params(beta, radius, epsilon, privacy, k), norm)


def point_batch(point: dict[str, float], counted: BallCounts, params: mech.AnomalyParams, norm: str) -> AnomalyBatch:
    """`prepare_point_query` for the mechanism `params` already validated (see `anomaly_batch`)."""
    norm_name = mech.validate_norm(norm)
    if counted.ball.shape != (1,):
        raise InternalError("a point query counts exactly one point")
    truth = mech.anomaly_truth(counted.multiplicity, counted.ball, params.beta)
    lam = mech.mechanism_lambda(counted.multiplicity, counted.ball, params)
    flip = mech.flip_probability(lam, params.epsilon)
    return AnomalyBatch(params, norm_name, None, (dict(point),), counted.multiplicity, counted.ball, truth, lam, flip)
