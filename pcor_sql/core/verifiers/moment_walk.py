"""Grubbs and z-score checks whose cost follows the change between contexts, not the width: the
verdicts from the state a check carries along the moves (`moment_state`).

Why the verdicts are the reference's. The reference (`moment_kernel._moments`, bit for bit
`SummaryPopulation` and `studentized_distance`) sums s1 and s2 over the member cells with
numpy's pairwise summation, whose result t differs from the exact sum S by at most
γ_L·Σ|a| with L ≤ 25 + log2(cells) (blocks of 128 in 8 lanes of ≤ 16 additions, 3 levels
joining the lanes, ≤ 7 left over, then one level per halving; Higham, Accuracy and Stability
§4.2). A move's cells are summed in plain doubles, which errs by at most γ_k times their
absolute sum (k cells), and that bound is added to `E`; the batch then enters the kept sums by
one double-double addition each, which err by far less than 2⁻⁷⁰ of the terms passed through
(`W`). So the kept sums differ from S by at most E + 2⁻⁷⁸·W, and Σ|a| from the kept one by E. So t lies in an interval around the kept sum, and so do, step
by step, the reference's mean, m2, s and statistic G — each step widened by `_REL` (≥ 10⁵ times
the rounding of one operation, theirs and ours) and the terms' error `_GAMMA`. When the
threshold (z, or Grubbs' critical value through the same table as the kernel) lies outside
G's interval, the reference's G is on the same side: that is the verdict. Otherwise — G
within ~10⁻¹¹ of the threshold, or m2 lost to cancellation (m2's interval reaches 0) — the
check asks the reference kernel itself, which reads every member cell. N is an exact count
and "constant at v" is the exact test lo == hi (V's cell is a member), so N < min_n and
constant populations are decided exactly, as the reference does.
"""

from __future__ import annotations

import math

from pcor_sql.core.jit import compiled
from pcor_sql.core.verifiers.moment_kernel import FALSE, TRUE, _moments, grubbs_code
from pcor_sql.core.verifiers.moment_state import (
    _DRIFT,
    _GAMMA,
    _REL,
    F_A1,
    F_A2,
    F_E1,
    F_E2,
    F_T1,
    F_T2,
    F_W1,
    F_W2,
    I_EQ,
    I_N,
    _walk,
)


@compiled
def _widen(lo, hi, slack):
    return lo - slack, hi + slack


@compiled
def statistic_bounds(state_i, state_f, shift, v, min_n):
    """(decided, n, G_lo, G_hi): an interval holding the reference's statistic G (see the
    module doc); decided = 0 when it cannot be bounded away from m2 = 0 (ask the reference).
    G is NaN (lo = hi = NaN) for n < min_n and 0.0 for a constant population, as there."""
    n = state_i[I_N]
    if n < min_n:
        return 1, n, math.nan, math.nan
    if state_i[I_EQ] == n:
        return 1, n, 0.0, 0.0
    fn = float(n)
    t1 = state_f[F_T1] + state_f[F_T1 + 1]
    t2 = state_f[F_T2] + state_f[F_T2 + 1]
    a1 = abs(state_f[F_A1] + state_f[F_A1 + 1])
    a2 = abs(state_f[F_A2] + state_f[F_A2 + 1])
    # The batches may have left Σ|s| short by up to E too.
    a1 += state_f[F_E1]
    a2 += state_f[F_E2]
    e1 = _GAMMA * a1 * (1.0 + _REL) + state_f[F_E1] + _DRIFT * state_f[F_W1] + _REL * abs(t1)
    e2 = _GAMMA * a2 * (1.0 + _REL) + state_f[F_E2] + _DRIFT * state_f[F_W2] + _REL * abs(t2)
    t1_lo, t1_hi = t1 - e1, t1 + e1
    t2_lo, t2_hi = t2 - e2, t2 + e2
    if t1_lo >= 0.0:
        sq_lo, sq_hi = t1_lo * t1_lo, t1_hi * t1_hi
    elif t1_hi <= 0.0:
        sq_lo, sq_hi = t1_hi * t1_hi, t1_lo * t1_lo
    else:
        sq_lo, sq_hi = 0.0, max(t1_lo * t1_lo, t1_hi * t1_hi)
    q_lo, q_hi = _widen(sq_lo / fn, sq_hi / fn, _REL * sq_hi / fn)
    m2_lo, m2_hi = _widen(t2_lo - q_hi, t2_hi - q_lo, _REL * (abs(t2_hi) + abs(t2_lo) + q_hi))
    if not m2_lo > 0.0:
        return 0, n, math.nan, math.nan
    d = fn - 1.0
    s_lo = math.sqrt(m2_lo / d) * (1.0 - _REL)
    s_hi = math.sqrt(m2_hi / d) * (1.0 + _REL)
    mean_lo, mean_hi = _widen(shift + t1_lo / fn, shift + t1_hi / fn,
                              _REL * (abs(shift) + max(abs(t1_lo), abs(t1_hi)) / fn))
    u_lo, u_hi = v - mean_hi, v - mean_lo
    if u_lo >= 0.0:
        num_lo, num_hi = u_lo, u_hi
    elif u_hi <= 0.0:
        num_lo, num_hi = -u_hi, -u_lo
    else:
        num_lo, num_hi = 0.0, max(-u_lo, u_hi)
    num_lo, num_hi = num_lo * (1.0 - _REL) - _REL * abs(v), num_hi * (1.0 + _REL) + _REL * abs(v)
    if num_lo < 0.0:
        num_lo = 0.0
    return 1, n, num_lo / s_hi * (1.0 - _REL), num_hi / s_lo * (1.0 + _REL)


@compiled
def zscore_walk(x, words, dx, dwords, flat, index, stats, ws, state_i, state_f, shift, v, z):
    """(verdict, n) of `ZScore(z).check` on the context, as `moment_kernel.zscore_kernel`
    (`ws`: `walk_stats(stats, v)`)."""
    _walk(x, words, dx, dwords, flat, index, ws, state_i, state_f)
    return zscore_verdict(x, words, flat, index, stats, state_i, state_f, shift, v, z)


@compiled
def zscore_verdict(x, words, flat, index, stats, state_i, state_f, shift, v, z):
    """(verdict, n) of `ZScore(z).check` on the context (x, words) whose state is
    (state_i, state_f), however it was summed (a walk's moves, `zscore_grid`'s grid): the
    bounds' verdict where they decide, else the reference kernel's."""
    decided, n, g_lo, g_hi = statistic_bounds(state_i, state_f, shift, v, 2)
    if decided:
        if g_lo > z:
            return TRUE, n
        if not g_hi > z:  # NaN (n < 2) included
            return FALSE, n
    n2, g = _moments(x, words, flat, index, stats, shift, v, 2)
    return (TRUE if g > z else FALSE), n2


@compiled
def grubbs_walk(x, words, dx, dwords, flat, index, stats, ws, state_i, state_f, shift, v, table):
    """(FALSE, TRUE or UNDECIDED, n) of `Grubbs(α).check`, as `moment_kernel.grubbs_kernel`:
    the table's answer is monotone in G (FALSE, UNDECIDED, TRUE as G grows), so where both ends
    of G's interval get the same answer, the reference's G gets it too."""
    _walk(x, words, dx, dwords, flat, index, ws, state_i, state_f)
    decided, n, g_lo, g_hi = statistic_bounds(state_i, state_f, shift, v, 3)
    if decided:
        low = grubbs_code(n, g_lo, table)
        if low == grubbs_code(n, g_hi, table):
            return low, n
    n2, g = _moments(x, words, flat, index, stats, shift, v, 3)
    return grubbs_code(n2, g, table), n2
