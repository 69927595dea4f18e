"""LOF written plainly from DESIGN.md §2 over all N points (O(N²)), for both rules for
duplicates, and the populations and data the LOF tests share (helper module, not a test file).

Tolerance. The verifier and these references compute the same distances (each |p − o| is one
correctly rounded subtraction of the same two doubles) but sum them in different orders and
groupings: the verifier over a band of ≤ 4H + 1 distinct values with multiplicities, the
reference over all N points, numpy's pairwise/SIMD summation deciding the order (which is why
results differ by an ulp between CPUs). Every sum is of non-negative terms, so reordering one
of m terms moves it by at most (m − 1)·u relatively (u = 2⁻⁵³; Higham, γ_m), ≤ 2.2e-13 for
N ≤ 2000. The one subtraction (a row's own copy, `lof_band._proven_lof`) removes a term no
larger than the rest of the sum (N_k(p) holds a point at distance kdist(p)), so it at most
doubles that. LOF is a mean of ratios of two such means: well under 1e-11 in all. RTOL = 1e-9
leaves a wide margin for another CPU, while a definitional slip (a wrong k', a missed tie, the
other rule's k-distance) changes neighbourhoods themselves and moves LOF by far more than
rounding can.
"""

from __future__ import annotations

import math

import numpy as np

from pcor_sql.core.verifiers.base import ArrayPopulation

RTOL = 1e-9
RULES = ("distinct", "plain")


def brute_lof_all(x, k, duplicates="distinct"):
    """LOF of every point of `x` under the rule `duplicates` (DESIGN.md §2, read literally)."""
    x = np.asarray(x, dtype=np.float64)
    d = np.abs(x[:, None] - x[None, :])
    if duplicates == "plain":
        kk = min(k, x.size - 1)
        own = d.copy()
        np.fill_diagonal(own, np.inf)  # a point is not its own neighbour; its copies are
        kdist = np.partition(own, kk - 1, axis=1)[:, kk - 1]  # k'-th nearest other point
        guard = 1e-10
    else:
        u = np.unique(x)
        kk = min(k, u.size - 1)
        du = np.abs(x[:, None] - u[None, :])
        du[x[:, None] == u[None, :]] = np.inf  # p's own value is not a neighbour value
        kdist = np.partition(du, kk - 1, axis=1)[:, kk - 1]  # k'-th nearest other distinct value
        guard = 0.0
    nbr = d <= kdist[:, None]  # N_k(p): every other point within k-distance(p)
    np.fill_diagonal(nbr, False)
    reach = np.maximum(kdist[None, :], d)  # reach(p, o) = max(kdist(o), |p − o|)
    lrd = 1.0 / ((reach * nbr).sum(axis=1) / nbr.sum(axis=1) + guard)
    return np.array([np.mean(lrd[nbr[p]] / lrd[p]) for p in range(x.size)])


def brute_lof(x, iv, k, duplicates="distinct"):
    return float(brute_lof_all(x, k, duplicates)[iv])


def assert_same(got, want, context):
    assert math.isclose(got, want, rel_tol=RTOL, abs_tol=0.0), (got, want, context)


class Spy(ArrayPopulation):
    """Records the windows fetched; refuses `values()` (LOF must work from windows)."""

    def __init__(self, values, v):
        super().__init__(np.sort(np.asarray(values, dtype=np.float64)), float(v))
        object.__setattr__(self, "windows", [])

    def values(self):
        raise AssertionError("LOF read every value")

    def between(self, lo, hi):
        got = super().between(lo, hi)
        self.windows.append(got.size)
        return got


class StingySpy(Spy):
    """A Spy whose `around` offers an eighth of the points asked for: first windows too small
    for the proof, so the growing path runs (a real population never under-delivers)."""

    def around(self, count):
        return super().around(max(1, count // 8))


def duplicate_heavy(rng, kind, n):
    if kind == 0:
        return rng.integers(0, 8, size=n).astype(float)  # small integer range
    if kind == 1:
        return np.minimum(np.round(rng.lognormal(10, 0.7, size=n), -3), 40000.0)  # top-coded
    if kind == 2:
        return rng.integers(-40, 40, size=n) * 0.1  # decimal grid: float distances tie unevenly
    if kind == 3:
        x = rng.normal(size=n)
        x[: n // 2] = x[0]  # half the rows share one value
        return x
    x = np.round(rng.exponential(size=n), 1)
    x[rng.integers(n, size=n // 10)] = 7.5  # a far clump
    return x
