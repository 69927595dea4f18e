"""Ball counts B_x(i, r) and multiplicities x_i of points (DESIGN.md §3), in numpy.

Distance, exactly as computed (float64, the reference the tests compare against):
  * one column: d(a, b) = |a − b|, whatever the norm (all three agree in one dimension);
  * several columns, Δ_c = a_c − b_c summed left to right over the columns:
    l1 = |Δ_1| + |Δ_2| + …,  l2 = sqrt(Δ_1² + Δ_2² + …),  linf = max_c |Δ_c|.
A record j is in the ball of i iff d(i, j) ≤ r; x_i counts the records equal to i in every
column. Values are read as DOUBLE (integers beyond 2⁵³ round; l2 overflows for differences
beyond ~1e154 — neither occurs in real tables of counts, ages or money).

The counting runs on the distinct points (queries and data are reduced to distinct points with
weights first, which is what makes real, tie-heavy columns cheap). No O(N²) loop anywhere:
  * one column: sorted range counting — np.searchsorted over the distinct sorted values and a
    cumulative weight, then a vectorised fix-up of each boundary so that membership is decided
    by the same float expression |a − b| ≤ r as the reference (the predicate is monotone on each
    side of a, because rounding is monotone, so the ball is a contiguous run of sorted values);
  * several columns: strips (`pcor_sql.anomaly.strips`).
Cost: O(N log N) for one column; for several, about Q·(2c+1)^{d−1} range look-ups plus the
pairs in the shell, a fraction ≈ 2d√(d−1)/c of the ball.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pcor_sql.anomaly.mechanisms import validate_norm
from pcor_sql.anomaly.strips import dense_ids, strip_ball_counts
from pcor_sql.errors import InternalError, UserError


@dataclass(frozen=True)
class BallCounts:
    """Per query point: x_i (records equal to it) and B_x(i, r) (records within r)."""

    multiplicity: np.ndarray
    ball: np.ndarray


def _validate_radius(radius: float) -> float:
    r = float(radius)
    if math.isnan(r) or math.isinf(r) or r < 0:
        raise UserError(f"radius must be a finite number ≥ 0, got {radius!r}", "pass e.g. radius = 1000")
    return r


def _as_points(arr: Any, name: str) -> np.ndarray:
    a = np.asarray(arr, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[1] == 0:
        raise InternalError(f"{name} must be an N × d array of points")
    if not np.all(np.isfinite(a)):
        raise InternalError(f"{name} holds non-finite values")
    return a + 0.0


def _ball_1d(data: np.ndarray, queries: np.ndarray, r: float) -> BallCounts:
    uniq, counts = np.unique(data, return_counts=True)
    cum = np.concatenate(([0], np.cumsum(counts)))
    n = uniq.size
    q = queries

    def inside(idx: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = np.zeros(idx.shape, dtype=bool)
        out[mask] = np.abs(q[mask] - uniq[idx[mask]]) <= r
        return out

    # Split at q: below it the predicate fl(q − s) ≤ r only turns true as s grows, above it
    # fl(s − q) ≤ r only turns false. Start from searchsorted on q ∓ r (already right unless a
    # rounding sits on the boundary) and step each end to the exact switch point; only values
    # within an ulp or two of a boundary move, so each loop runs a pass or two.
    mid = np.searchsorted(uniq, q, side="left")
    lo = np.minimum(np.searchsorted(uniq, q - r, side="left"), mid)
    hi = np.maximum(np.searchsorted(uniq, q + r, side="right"), mid)
    while (m := inside(lo - 1, lo > 0)).any():
        lo[m] -= 1
    while (m := (lo < mid) & ~inside(lo, lo < mid)).any():
        lo[m] += 1
    while (m := inside(hi, hi < n)).any():
        hi[m] += 1
    while (m := (hi > mid) & ~inside(hi - 1, hi > mid)).any():
        hi[m] -= 1
    ball = cum[hi] - cum[lo]
    pos = np.minimum(mid, n - 1)
    mult = np.where(uniq[pos] == q, counts[pos], 0)
    return BallCounts(mult.astype(np.int64), ball.astype(np.int64))


def _row_ids(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row of `rows`, the index of the equal row of `table` (unique rows), else −1."""
    t_ids = np.zeros(table.shape[0], dtype=np.int64)
    r_ids = np.zeros(rows.shape[0], dtype=np.int64)
    alive = np.ones(rows.shape[0], dtype=bool)
    for j in range(table.shape[1]):
        values = np.unique(table[:, j])
        t_key = t_ids * (values.size + 1) + np.searchsorted(values, table[:, j])
        rank = dense_ids(rows[:, j], values)
        alive &= rank >= 0
        level = np.unique(t_key)
        t_ids = np.searchsorted(level, t_key)
        found = dense_ids(r_ids * (values.size + 1) + np.maximum(rank, 0), level)
        alive &= found >= 0
        r_ids = np.maximum(found, 0)
    # t_ids are now distinct per distinct table row; map back to table positions.
    position = np.empty(table.shape[0], dtype=np.int64)
    position[t_ids] = np.arange(table.shape[0])
    return np.where(alive, position[r_ids], -1)


def _multiplicity(data: np.ndarray, weights: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Total weight of the data point equal to each query point (data rows are distinct)."""
    idx = _row_ids(data, queries)
    return np.where(idx >= 0, weights[np.maximum(idx, 0)], 0).astype(np.int64)


def ball_counts(data: Any, queries: Any, radius: float, norm: str = "l2") -> BallCounts:
    """x_i and B_x(i, r) of each query point against the data points (N × d and Q × d arrays).

    Queries need not be data points (then x_i = 0). See the module docstring for the methods.
    """
    r = _validate_radius(radius)
    norm = validate_norm(norm)
    pts = _as_points(data, "data")
    qs = _as_points(queries, "queries")
    if pts.shape[1] != qs.shape[1]:
        raise InternalError("data and queries have different numbers of columns")
    if qs.shape[0] == 0 or pts.shape[0] == 0:
        zeros = np.zeros(qs.shape[0], dtype=np.int64)
        return BallCounts(zeros, zeros.copy())
    uq, inverse = np.unique(qs, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if pts.shape[1] == 1:
        res = _ball_1d(pts[:, 0], uq[:, 0], r)
    else:
        up, weights = np.unique(pts, axis=0, return_counts=True)
        weights = weights.astype(np.int64)
        res = BallCounts(_multiplicity(up, weights, uq), strip_ball_counts(up, weights, uq, r, norm))
    return BallCounts(res.multiplicity[inverse], res.ball[inverse])
