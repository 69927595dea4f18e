"""The histogram check compiled (numba): membership, V's numpy bin and its count in one call.

The reference is `Histogram.check` (core/verifiers/histogram.py, whose docstring derives the
method): b = ⌈√N⌉ bins over [min, max] with `np.linspace`'s edges, V's bin i by numpy's
arithmetic index corrected once by edge comparisons, and the values numpy puts in bin i form
one interval [L, U) ([L, U] for the last bin), counted in the member cells' sorted runs.

Here the edges are computed one at a time as `np.linspace` computes them: step = (max − min)/b,
edge k = k·step + min for k < b, edge b = max. `np.histogram` refuses nothing but the reference
raises when two edges coincide; the kernel does not scan all b + 1 edges for that. Instead it
proves them strictly increasing: each edge is within one unit in the last place (ulp) of
k·step + min at magnitude ≤ 2M (M = max(|min|, |max|)), so step > 8·ulp(M) keeps consecutive
edges apart. It also requires L = edge i and U = edge i+1 to be exactly where numpy's index
changes (as the reference checks before bisecting). When either proof fails (a range a few ulps
wide, a bisection case), the kernel answers FALLBACK and the caller runs the reference, which
raises or bisects: the verdicts are the reference's in every case.

Counting: per member run, the first value ≥ L and the end of [L, U] (or [L, U)) are found by
binary search inside one shell of the probe of v (`cellruns.Probe`: positions of a ladder of
rungs around v in every run, built once per value and shared with the reference path), as
`Probe.count` does; numpy's `searchsorted` sides: left for L; right for a closed U, left for an
open one.

Privacy: a verifier releases nothing by itself; validity-only steps cost nothing (DESIGN.md §2).
"""

from __future__ import annotations

import math

import numpy as np

from pcor_sql.core.jit import compiled, first_position
from pcor_sql.core.verifiers.moment_kernel import member_span

FALSE, TRUE, FALLBACK = 0, 1, 2


@compiled
def _edge(k, b, lo, hi, step):
    if k == b:
        return hi
    return k * step + lo


@compiled
def _bin(x, lo, hi, b, step):
    """numpy.histogram's bin of x (lo ≤ x ≤ hi): `histogram._numpy_bin_index`."""
    i = int((x - lo) / (hi - lo) * b)
    if i == b:
        i -= 1
    if x < _edge(i, b, lo, hi, step):
        i -= 1
    elif x >= _edge(i + 1, b, lo, hi, step) and i != b - 1:
        i += 1
    return i


@compiled
def _isqrt_ceil(n):
    """⌈√n⌉ in integers (`histogram.bin_count_for`)."""
    r = int(math.sqrt(n))
    while r * r > n:
        r -= 1
    while (r + 1) * (r + 1) <= n:
        r += 1
    return r if r * r == n else r + 1


COUNT = 3  # `bin_interval`: count the context's values in [left, right] (or [left, right))


@compiled
def bin_interval(n, lo, hi, v):
    """(code, left, right, closed) of `Histogram.check` on a population of n ≥ 1 values over
    [lo, hi] holding v: FALSE when it is constant (one bin of all n ≥ rel·n values), FALLBACK when
    the edges need the reference (see the module doc), else COUNT with the interval numpy maps
    to V's bin — [left, right] when `closed`, else [left, right)."""
    if lo == hi:
        return FALSE, lo, hi, True
    b = _isqrt_ceil(n)
    step = (hi - lo) / b
    big = max(abs(lo), abs(hi))
    if big < 1e-290:  # near subnormals the ulp below would be wrong: let the reference decide
        return FALLBACK, lo, hi, True
    ulp = math.ldexp(1.0, math.frexp(big)[1] - 53)
    if not (math.isfinite(step) and step > 8.0 * ulp):
        return FALLBACK, lo, hi, True
    i = _bin(v, lo, hi, b, step)
    left = lo
    if i > 0:
        left = _edge(i, b, lo, hi, step)
        if not (_bin(left, lo, hi, b, step) >= i and _bin(np.nextafter(left, -math.inf), lo, hi, b, step) < i):
            return FALLBACK, lo, hi, True
    closed = i == b - 1
    right = hi
    if not closed:
        right = _edge(i + 1, b, lo, hi, step)
        if not (_bin(right, lo, hi, b, step) >= i + 1 and _bin(np.nextafter(right, -math.inf), lo, hi, b, step) <= i):
            return FALLBACK, lo, hi, True
    if not left <= v <= right:  # (numpy's bin of v holds v; guard the probe's premise anyway)
        return FALLBACK, lo, hi, True
    return COUNT, left, right, closed


@compiled
def histogram_kernel(x, words, flat, index, stats, values, neg_a, b_rungs, A, B, v, rel):
    """(FALSE, TRUE or FALLBACK, n) of `Histogram(rel).check` on the context (x, words:
    `jit.context_words`; `stats`: `moment_kernel.cell_stats`; values: the sorted runs; neg_a,
    b_rungs, A, B: the runs' probe of v, `cellruns.Probe`)."""
    scratch = np.empty(flat.shape[0], dtype=np.int64)
    k, n, lo, hi = member_span(x, words, flat, index, stats, scratch)
    if n == 0:
        return FALLBACK, n
    code, left, right, closed = bin_interval(n, lo, hi, v)
    if code != COUNT:
        return code, n
    # Count [left, right] (closed) or [left, right) in the member runs from the probe of v:
    # each end lies in one shell between consecutive rungs (`cellruns` module doc).
    # The first left rung j with a_j ≤ left (`neg_a` = −a ascending), the first right rung with
    # b_j ≥ right: both numpy's searchsorted left.
    jl = first_position(neg_a, 0, neg_a.size, -left, False)
    jr = first_position(b_rungs, 0, b_rungs.size, right, False)
    inside = 0
    for j in range(k):
        c = scratch[j]
        if jl == 0:
            first = A[0, c]
        else:
            first = first_position(values, A[jl, c], A[jl - 1, c], left, False)
        if jr == 0:
            end = B[0, c] if closed else A[0, c]
        elif closed:
            end = first_position(values, B[jr - 1, c], B[jr, c], right, True)
        else:
            end = first_position(values, B[jr - 1, c], B[jr, c], right, False)
        inside += end - first
    return (TRUE if inside < rel * n else FALSE), n
