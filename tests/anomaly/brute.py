"""Brute-force references for the ball counts: the distance predicate by the reference float
expressions, O(N²)."""

from __future__ import annotations

import numpy as np


def within(data: np.ndarray, q: np.ndarray, r: float, norm: str) -> np.ndarray:
    """The reference predicate d(q, x_j) ≤ r for every data row (sums left to right)."""
    diff = q[None, :] - data
    if data.shape[1] == 1:
        dist = np.abs(diff[:, 0])
    elif norm == "l1":
        dist = np.abs(diff[:, 0])
        for c in range(1, data.shape[1]):
            dist = dist + np.abs(diff[:, c])
    elif norm == "l2":
        acc = diff[:, 0] * diff[:, 0]
        for c in range(1, data.shape[1]):
            acc = acc + diff[:, c] * diff[:, c]
        dist = np.sqrt(acc)
    else:
        dist = np.abs(diff).max(axis=1)
    return dist <= r


def brute_force(data, queries, r: float, norm: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.asarray(data, dtype=np.float64).reshape(len(data), -1)
    queries = np.asarray(queries, dtype=np.float64).reshape(len(queries), -1)
    ball = np.array([np.count_nonzero(within(data, q, r, norm)) for q in queries])
    mult = np.array([np.count_nonzero(np.all(data == q, axis=1)) for q in queries])
    return mult, ball


def tied(rng: np.random.Generator, n: int, d: int, step: float) -> np.ndarray:
    """Values on a coarse lattice (many ties, many distances exactly equal to r) plus jitter."""
    lattice = rng.integers(0, 12, size=(n, d)) * step
    jitter = np.where(rng.random((n, d)) < 0.2, rng.normal(0, step, (n, d)), 0.0)
    return lattice + jitter
