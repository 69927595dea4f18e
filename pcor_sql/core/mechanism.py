"""The exponential mechanism (McSherry & Talwar 2007), sampled exactly from centred scores.

EM_ε1(S): pick c ∈ S with probability exp(ε1·u(c)/Δu) / Σ_{c'∈S} exp(ε1·u(c')/Δu).

Privacy map (under OCDP: neighbouring D, D' have the same candidate set S):
  General utility, |u(c,D) − u(c,D')| ≤ Δu. Pr[c|D]/Pr[c|D'] =
  exp(ε1(u(c,D) − u(c,D'))/Δu) · Σ exp(ε1 u(c',D')/Δu) / Σ exp(ε1 u(c',D)/Δu)
  ≤ e^{ε1} · e^{ε1} = e^{2ε1}  (paper, Thm 4.1).
  Monotone utility (adding a row never lowers any u): for D' = D + row every u moves up by
  between 0 and Δu, so the numerator factor is ≤ 1 when the denominator factor is ≤ e^{ε1}
  and vice versa: only one of the two can exceed 1, and the ratio is ≤ e^{ε1}
  (Dwork & Roth 2014, §3.4). `population` and `overlap` are monotone.

Sampling, and why its law is EM's. Let M = max u and x_c = ε1·(u(c) − M)/Δu ≤ 0 (the centred
score). exp(ε1·u(c)/Δu) = e^{x_c}·e^{ε1·M/Δu}, and the constant factor cancels when the
weights are normalised, so weights w_c = e^{x_c} give the EM law; the best candidate weighs
exactly 1, so nothing overflows and the total is ≥ 1. Each weight is computed as a dyadic
rational w̃_c = m_c·2^{e_c} (m_c < 2⁵³ an integer): with k_c = ⌊−x_c/ln 2⌋,
w̃_c = exp(x_c + k_c·ln 2)·2^{−k_c}, so exp is only ever taken of a number in about
[−ln 2, 0] and no weight underflows before 2⁻²⁰⁴⁸. The pick is exact inverse-CDF sampling of
w̃_c / Σ w̃ by `pick_by_cumulative`, which compares an exact uniform U, read 64 bits at a time,
with exact integer cumulative sums, and returns c iff U·T lies in c's interval. A few
candidates (≤ _SCALAR) share one cumulative over the integers m_c·2^{e_c − min e}. Many are
grouped by e_c: a group is picked with probability (its exact weight)/(total), then a member
with probability m_c/(the group's Σ m); the product is m_c·2^{e_c}/Σ w̃ = w̃_c/Σ w̃ again.
Candidates may repeat (a multiset): a repeated context gets its weight once per occurrence.

Why not Gumbel-max (argmax of x_c + G_c)? Its law is EM's only for exact Gumbel noise; with
G = −log(−log V) from a double V the noise is bounded (by the doubles next to 1 and 0), and
the error it leaves is a property of two tails and of floating-point argmax ties, not a clean
bound. Inverse-CDF over exact integers has no grid at all, and reads one or two 64-bit words
per call instead of |S| uniforms.

Remaining numeric error. There is no grid error; all of it comes from computing the scores
and weights in double precision (unit roundoff r = 2⁻⁵³):
  * rounding: x_c = ε1·(u − M)/Δu takes three roundings (≤ 3|x_c|·r absolute), the reduction
    x_c + k_c·ln 2 adds ≤ (2|x_c| + 3)·r and exp ≤ 2r on [−ln 2, 0] (checked in the tests for
    numpy's and math's exp), so |ln(w̃_c / e^{x_c})| ≤ η_c := (5|x_c| + 6)·r ≤ 2⁻⁴⁰ for every
    kept candidate. Each kept candidate's probability is therefore within a factor
    e^{±(2⁻³⁹ + |S|·2⁻²⁰⁴⁸)} of EM's, and in total variation the error is
    ≤ Σ_c w_c·η_c / Σ w ≤ (5·E[|x|] + 6)·r ≤ (5·ln|S| + 11)·2⁻⁵³, since E[|x|] ≤ ln|S| + 1
    under EM (Pr[|x| ≥ t] ≤ |S|·e^{−t}); that is below the |S|·2⁻⁵² of a 53-bit grid for
    |S| ≥ 12.
  * truncation: a candidate with x_c < −2048·ln 2 ≈ −1419.6 (more than 1419.6·Δu/ε1 below
    the best) weighs 0; its EM probability is < 2⁻²⁰⁴⁸, so the total variation this adds is
    < |S|·2⁻²⁰⁴⁸.
  Privacy: on neighbours, the ratio bound above holds with ε + 2⁻³⁸ for every output both
  keep; an output kept on one and cut on the other has probability < e^{2ε1}·2⁻²⁰⁴⁸ (a score
  moves by ≤ 2ε1 between neighbours), so the mechanism is (ε + 2⁻³⁸, |S|·e^{2ε1}·2⁻²⁰⁴⁸)-DP
  wherever the exact one is ε-DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from pcor_sql.core.randomness import Source, pick_by_cumulative
from pcor_sql.errors import InternalError

#: Candidates more than CUTOFF_BITS·ln 2 (in units of Δu/ε1) below the best weigh 0.
CUTOFF_BITS = 2048
_LN2 = math.log(2.0)
_CUT = CUTOFF_BITS * _LN2
_NEG_INV_LN2 = -1.0 / _LN2
#: Up to this many candidates the weights and the pick are computed with Python scalars (same
#: IEEE roundings; `math.exp` for `np.exp`), which is several times faster than numpy calls.
_SCALAR = 128
_LIMB = 26  # mantissas (< 2⁵³) are summed as two 26/27-bit limbs so int64 sums stay exact
_LOW = (1 << _LIMB) - 1
_CHUNK = 1 << 25  # float64 bincount of < 2²⁵ limbs < 2²⁷ each is exact (sums < 2⁵²)


def em_cost(epsilon1: float, monotone: bool) -> float:
    """Privacy cost of one EM call: ε1 for a monotone utility, 2ε1 in general."""
    return epsilon1 if monotone else 2.0 * epsilon1


def _utilities(utilities: Sequence[float]) -> tuple[np.ndarray, float, float]:
    """(u as a flat float64 array, max u, min u), checked once per call: both extremes are
    finite iff every utility is (a NaN makes max NaN)."""
    u = np.asarray(utilities, dtype=np.float64).reshape(-1)
    if u.size == 0:
        raise InternalError("exponential mechanism over an empty candidate set")
    top, bottom = float(u.max()), float(u.min())
    if not (math.isfinite(top) and math.isfinite(bottom)):
        raise InternalError("exponential mechanism over a non-finite utility")
    return u, top, bottom


def _lowest_score(top: float, bottom: float, epsilon1: float, sensitivity: float) -> float:
    """min x_c, the worst candidate's centred score, by the vector's own roundings on Python
    floats (which overflow to ±inf without warnings, as `np.errstate(over="ignore")` does)."""
    return float(epsilon1) * (bottom - top) / float(sensitivity)


def _centred(u: np.ndarray, top: float, lowest: float, epsilon1: float, sensitivity: float) -> np.ndarray:
    """x = ε1·(u − max u)/Δu for checked u. Rounding is monotone, so when the lowest score is
    finite no entry overflows and the errstate guard (a few µs) is not needed."""
    if math.isfinite(lowest):
        return epsilon1 * (u - top) / sensitivity
    with np.errstate(over="ignore"):
        return epsilon1 * (u - top) / sensitivity


def centred_scores(utilities: Sequence[float], epsilon1: float, sensitivity: float = 1.0) -> np.ndarray:
    """x_c = ε1·(u(c) − max u)/Δu ≤ 0 in double precision (the best is exactly 0).

    A gap too large for a double becomes −inf (weight 0), which is its limit.
    """
    u, top, bottom = _utilities(utilities)
    return _centred(u, top, _lowest_score(top, bottom, epsilon1, sensitivity), epsilon1, sensitivity)


def em_probabilities(utilities: Sequence[float], epsilon1: float, sensitivity: float = 1.0) -> np.ndarray:
    """The EM law over the candidates in double precision (for tests and audits).

    Probabilities below about 1e-308 of the best's underflow to 0 here; the sampler keeps them
    (`em_sampler_law` is the sampler's exact law).
    """
    u, top, bottom = _utilities(utilities)
    if math.isinf(epsilon1):
        best = u == top
        return best / best.sum()
    w = np.exp(_centred(u, top, _lowest_score(top, bottom, epsilon1, sensitivity), epsilon1, sensitivity))
    return w / w.sum()


def _scalar_weights(u: list[float], epsilon1: float, sensitivity: float) -> list[tuple[int, int]]:
    """(m_c, e_c) for a few candidates: the vector path's arithmetic on Python floats."""
    top = max(u)
    out = []
    for uc in u:
        x = epsilon1 * (uc - top) / sensitivity  # a float overflow gives −inf here, as in numpy
        if not x >= -_CUT:
            out.append((0, 0))
            continue
        k = math.floor(x * _NEG_INV_LN2)
        frac, e = math.frexp(math.exp(x + k * _LN2))  # exp of a number in about [−ln 2, 0]
        out.append((int(math.ldexp(frac, 53)), e - 53 - k))
    return out


def em_weights(utilities: Sequence[float], epsilon1: float, sensitivity: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The sampler's weights exactly: w̃_c = m_c·2^{e_c} ≈ exp(x_c) (int64 arrays m, e).

    m_c ∈ [2⁵², 2⁵³), or 0 for a candidate beyond the cutoff; the best has m = 2⁵², e = −52,
    i.e. weight 1. See the module docstring for the error of w̃_c against e^{x_c}.
    """
    u, top, bottom = _utilities(utilities)
    if u.size <= _SCALAR:
        pairs = _scalar_weights(u.tolist(), epsilon1, sensitivity)
        return np.array([m for m, _ in pairs], dtype=np.int64), np.array([e for _, e in pairs], dtype=np.int64)
    return _vector_weights(u, top, bottom, epsilon1, sensitivity)


def _vector_weights(u: np.ndarray, top: float, bottom: float, epsilon1: float,
                    sensitivity: float) -> tuple[np.ndarray, np.ndarray]:
    """`em_weights` of checked utilities (`_utilities`), numpy path."""
    lowest = _lowest_score(top, bottom, epsilon1, sensitivity)
    x = _centred(u, top, lowest, epsilon1, sensitivity)
    if lowest >= -_CUT:  # every candidate kept: the clamp and the cut below change nothing
        k = np.floor(x * _NEG_INV_LN2)
        frac, e = np.frexp(np.exp(x + k * _LN2))
        return (frac * 2.0**53).astype(np.int64), e.astype(np.int64) - 53 - k.astype(np.int64)
    xk = np.maximum(x, -_CUT - _LN2)  # finite, so k is an ordinary integer
    k = np.floor(xk * _NEG_INV_LN2)
    frac, e = np.frexp(np.exp(xk + k * _LN2))  # exp of a number in about [−ln 2, 0]
    mant = (frac * 2.0**53).astype(np.int64)  # exact: frac has 53 significant bits
    mant[~(x >= -_CUT)] = 0
    return mant, e.astype(np.int64) - 53 - k.astype(np.int64)


def em_sampler_law(utilities: Sequence[float], epsilon1: float, sensitivity: float = 1.0) -> list[Fraction]:
    """The exact law `exponential_mechanism` samples (finite ε1): w̃_c / Σ w̃ as fractions."""
    mant, expo = em_weights(utilities, epsilon1, sensitivity)
    w = [Fraction(int(m)) * Fraction(2) ** int(e) for m, e in zip(mant, expo)]
    total = sum(w)
    return [wc / total for wc in w]


def _pick_scalar(pairs: list[tuple[int, int]], source: Source) -> int:
    """Index c with probability exactly m_c·2^{e_c} / Σ m·2^e: one inverse-CDF over integers."""
    base = min(e for m, e in pairs if m)
    cumulative, acc = [], 0
    for m, e in pairs:
        acc += m << (e - base) if m else 0
        cumulative.append(acc)
    return pick_by_cumulative(source, cumulative.__getitem__, len(cumulative))


def _pick_vector(mant: np.ndarray, expo: np.ndarray, source: Source) -> int:
    """Index c with probability exactly m_c·2^{e_c} / Σ m·2^e, for many candidates.

    A group (equal e) is picked by its exact weight, then a member by m_c: the product is the
    same law. Mantissas are summed in 26/27-bit limbs so that the int64 sums stay exact.
    """
    kept = mant > 0
    base = int(expo[kept].min())
    groups = np.where(kept, expo - base, 0)
    n_groups = int(groups.max()) + 1
    hi = np.zeros(n_groups, dtype=np.int64)
    lo = np.zeros(n_groups, dtype=np.int64)
    for start in range(0, mant.size, _CHUNK):  # float64 bincount is exact on a chunk
        g, m = groups[start : start + _CHUNK], mant[start : start + _CHUNK]
        hi += np.bincount(g, weights=m >> _LIMB, minlength=n_groups).astype(np.int64)
        lo += np.bincount(g, weights=m & _LOW, minlength=n_groups).astype(np.int64)
    present = np.flatnonzero(hi | lo)
    cumulative, acc = [], 0
    for h, l, g in zip(hi[present].tolist(), lo[present].tolist(), present.tolist()):
        acc += ((h << _LIMB) + l) << g
        cumulative.append(acc)
    group = present[pick_by_cumulative(source, cumulative.__getitem__, len(cumulative))]
    members = np.flatnonzero((groups == group) & kept)
    m = mant[members]
    cum_hi, cum_lo = np.cumsum(m >> _LIMB), np.cumsum(m & _LOW)
    j = pick_by_cumulative(source, lambda i: (int(cum_hi[i]) << _LIMB) + int(cum_lo[i]), members.size)
    return int(members[j])


def exponential_mechanism(
    utilities: Sequence[float], epsilon1: float, source: Source, sensitivity: float = 1.0
) -> int:
    """Index of the candidate chosen by EM_ε1 (exact sampling of centred weights; see the
    module docstring for the law and the remaining error). Cost: see `em_cost`."""
    if not epsilon1 > 0 or not sensitivity > 0:
        raise InternalError(f"EM needs ε1 > 0 and Δu > 0, got {epsilon1}, {sensitivity}")
    if 1 <= len(utilities) <= _SCALAR and not math.isinf(epsilon1):
        u = [float(v) for v in utilities]
        if not all(map(math.isfinite, u)):
            raise InternalError("exponential mechanism over a non-finite utility")
        # One candidate: the law is a point mass; no draw is needed (and none leaks anything).
        return 0 if len(u) == 1 else _pick_scalar(_scalar_weights(u, epsilon1, sensitivity), source)
    u, top, bottom = _utilities(utilities)  # checked once: the helpers below take it as is
    if u.size == 1:
        return 0
    if math.isinf(epsilon1):
        # ε1 = ∞ is argmax with uniform tie-breaking (the limit law), for edge-case tests.
        best = np.flatnonzero(u == top)
        return int(best[pick_by_cumulative(source, lambda j: j + 1, best.size)])
    return _pick_vector(*_vector_weights(u, top, bottom, epsilon1, sensitivity), source)


@dataclass(frozen=True)
class EMCall:
    """One EM call of a search, as recorded in its trace."""

    step: str
    candidates: int
