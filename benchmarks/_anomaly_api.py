"""The anomaly mechanism's pieces the evidence benchmark reads, imported here and nowhere else.

The per-record ball counts over a whole relation and the flip probabilities of Construction 1
have no public entry point (a release answers for selected records and charges for them; the
evidence is the owner's exact evaluation over every record). If they move, only these
imports change.
"""

from __future__ import annotations

from pcor_sql.anomaly.mechanisms import (
    anomaly_truth,
    flip_probability,
    lambda_k,
    mdd_dp,
    sensitive,
    validate_norm,
    validate_params,
)
from pcor_sql.anomaly.points import load_points, relation_ball_counts

__all__ = [
    "anomaly_truth", "flip_probability", "lambda_k", "load_points", "mdd_dp", "relation_ball_counts", "sensitive",
    "validate_norm", "validate_params",
]
