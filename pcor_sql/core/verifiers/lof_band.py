"""LOF's kernel: LOF(V) from one window of the population, over a band of distinct values
around V, under either rule for duplicates — or why the window cannot prove the result.

`lof.py` holds the definitions, the proof that a window's result is the global one, and the
loop that grows windows; this module holds the arithmetic. Both rules share it: they differ
only in the sequence a k-distance is read from (the points, or the distinct values: see
`plain_window_lof` and `distinct_window_lof`) and in scikit-learn's 1e-10 guard (plain only).

Why a band of distinct values. Every quantity depends on a point only through its value, so
the work is on distinct values u_j with multiplicities c_j. In 1-D the k'+1 points (or
distinct values) nearest p, p included, are consecutive in sorted order, so
kdist(p) = min_i max(p − s[j−i], s[j+k'−i] − p), i = 0..k', with s the points (plain) or the
distinct values (distinct) and j p's index in s — one vectorized (k'+1) × (4H+1) step over the
band of 4H+1 distinct values around V (H = k'+1). Neighbourhoods are then a matrix of the rows
in N_k(V) by the 2H+1 distinct values around each. With exact distances a point has at most
k' distinct values within its k-distance on each side (under both rules: a (k'+1)-th one on
one side would put k' points strictly closer); if rounding ties more than that (distances
absorbed at huge magnitudes) the band edge is hit and H doubles, so the result is exact
regardless.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from pcor_sql.errors import InternalError

LRD_GUARD = 1e-10  # scikit-learn's guard against duplicate points (reach-dist mean 0): plain rule only
FAR = np.finfo(np.float64).max  # stands in for an infinite k-distance that carries weight 0


class _Layout(NamedTuple):
    """Index arrays for one (k', H), built once: the kernel only gathers through them.

    2-D operands are full-shape or broadcast along the last axis only: numpy runs an (n, 1)
    operand row by row, which costs more than gathering it to full shape at these sizes.
    """

    run_i: np.ndarray  # (k'+1, 4H+1): −i, for each band position
    cols: np.ndarray  # (2H+1, 2H+1): band position of row r's column c, r + c
    rowpos: np.ndarray  # (2H+1, 2H+1): band position of row r itself, H + r
    pad_int: np.ndarray  # 2H + 1 zeros (intp): left pads of the run bounds, and the first start
    tail: np.ndarray  # 2H + 1 zeros (intp): plus nw, the right pads of the run bounds
    neg: np.ndarray  # k' × −inf, left pad of the window values
    pos: np.ndarray  # k' × +inf, right pad of the window values
    offsets: np.ndarray  # −2H .. 2H (intp): band positions relative to V's distinct index


@lru_cache(maxsize=256)
def _layout(k: int, h: int) -> _Layout:
    width, band = 2 * h + 1, 4 * h + 1
    steps = np.arange(k + 1, dtype=np.intp)[:, None]
    arrays = _Layout(
        run_i=np.broadcast_to(-steps, (k + 1, band)).copy(),
        cols=np.arange(width, dtype=np.intp)[:, None] + np.arange(width, dtype=np.intp)[None, :],
        rowpos=np.broadcast_to(h + np.arange(width, dtype=np.intp)[:, None], (width, width)).copy(),
        pad_int=np.zeros(2 * h + 1, dtype=np.intp),
        tail=np.zeros(2 * h + 1, dtype=np.intp),
        neg=np.full(k, -np.inf),
        pos=np.full(k, np.inf),
        offsets=np.arange(-2 * h, 2 * h + 1, dtype=np.intp),
    )
    for a in arrays:
        a.flags.writeable = False  # shared between calls: never mutated
    return arrays


class Grow(NamedTuple):
    """The window did not prove the result; `radius` is a hint for the next one (may be inf)."""

    radius: float


class Widen(NamedTuple):
    """More than H distinct values tie within some used k-distance: widen the band."""


def plain_window_lof(w: np.ndarray, v: float, k: int, h: int, left_out: float, right_out: float
                     ) -> float | Grow | Widen:
    """LOF(V) under the plain rule from window points `w` (sorted), or why the window cannot
    prove it. k-distances are read from the points (p's own copies count toward k').

    `left_out` / `right_out` is the nearest double just outside the window on that side, or
    −inf / +inf when the window already holds every value on that side.
    """
    lay = _layout(k, h)
    sb, cb, lo_r, hi_r = _band_runs(w, v, h, lay)
    if cb[2 * h] > k:
        # k' other copies of v: kdist(V) = 0, N_k(V) is V's copies, whose k-distances are 0
        # too, so every lrd involved is 1/1e-10 and LOF(V) = 1 exactly.
        return 1.0
    return _band_lof(w, sb, cb, v, k, h, lo_r, hi_r, left_out, right_out, lay, LRD_GUARD)


def distinct_window_lof(ud: np.ndarray, cd: np.ndarray, v: float, k: int, h: int, left_out: float, right_out: float
                        ) -> float | Grow | Widen:
    """LOF(V) under Breunig et al.'s rule for duplicates from the window's distinct values `ud`
    (ascending) and their multiplicities `cd` (float64), or why the window cannot prove it.
    k-distances are read from the distinct values, so p's own copies never count toward k' and
    every k-distance is the distance between two different doubles: > 0 (IEEE subtraction of
    unequal finite doubles is never 0), so no guard is needed.
    """
    lay = _layout(k, h)
    jv = int(ud.searchsorted(v))
    if jv >= ud.size or ud[jv] != v:
        raise InternalError("the record's value is not in its own population")
    sb, cb, lo_r, hi_r = _distinct_band(ud, cd, jv, h, lay)
    return _band_lof(ud, sb, cb, v, k, h, lo_r, hi_r, left_out, right_out, lay, 0.0)


def _band_lof(values: np.ndarray, sb: np.ndarray, cb: np.ndarray, v: float, k: int, h: int, lo_r: int, hi_r: int,
              left_out: float, right_out: float, lay: _Layout, guard: float) -> float | Grow | Widen:
    """LOF(V) from the band's positions `sb` in `values` (points or distinct values) and their
    multiplicities `cb`, or Grow when V's own k-distance reaches past the window."""
    ub = values[sb]
    kdb = _band_kdists(values, sb, ub, k, lay)
    if kdb[2 * h] == FAR:
        return Grow(math.inf)
    return _proven_lof(ub, cb, kdb, v, h, lo_r, hi_r, left_out, right_out, lay, guard)


def distinct_runs(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted `w` and their multiplicities (float64: weights)."""
    brk = (w[1:] != w[:-1]).nonzero()[0]
    if brk.size == w.size - 1:
        return w, _ones(w.size)  # no ties (the usual window of a continuous metric)
    brk += 1
    starts = np.concatenate(((0,), brk))
    counts = np.diff(np.concatenate((starts, (w.size,)))).astype(np.float64)
    return w[starts], counts


def _ones(n: int) -> np.ndarray:
    """n ones (float64), read-only and shared: multiplicities of a window without ties."""
    global _ONES
    if _ONES.size < n:
        _ONES = np.ones(max(n, 2 * _ONES.size))
        _ONES.flags.writeable = False
    return _ONES[:n]


_ONES = np.ones(0)


def _band_runs(w: np.ndarray, v: float, h: int, lay: _Layout) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The band of 4H+1 distinct values around v (v at band position 2H) in sorted points `w`.

    Returns each band value's first position in `w`, its multiplicity (float64: it is a
    weight in the lrd sums) and the rows lo_r .. hi_r−1 of 0 .. 2H whose values are real, not
    pads. Everything downstream works on these distinct values rather than on the points.
    """
    nw = w.size
    g = 2 * h
    brk = (w[1:] != w[:-1]).nonzero()[0]
    brk += 1  # first positions of distinct values 1..D−1
    pv = int(w.searchsorted(v))
    if pv >= nw or w[pv] != v:
        raise InternalError("the record's value is not in its own population")
    jv = int(brk.searchsorted(pv, side="right"))  # distinct index of v
    if g < jv and jv + g < brk.size:
        # Interior (the usual case, windows are sized for it): the band of distinct values
        # jv−2H .. jv+2H lies inside the window; band[i] .. band[i+1] is the run of value i.
        band = brk[jv - g - 1 : jv + g + 1]
        sb = band[:-1]
        lo_r, hi_r = 0, g + 1  # every row is a real value
    else:
        # Near the window's ends: pad with 2H empty runs on each side. A pad repeats the edge
        # value with multiplicity 0, so it is a real value that weighs nothing.
        bounds = np.concatenate((lay.pad_int, brk, lay.tail + nw))
        band = bounds[jv : jv + 2 * g + 2]
        sb = np.minimum(band[:-1], nw - 1)  # right pads: the last position
        lo_r, hi_r = max(0, h - jv), min(g + 1, brk.size + 1 - jv + h)  # rows of real values
    cb = (band[1:] - band[:-1]).astype(np.float64)  # multiplicities
    return sb, cb, lo_r, hi_r


def _distinct_band(ud: np.ndarray, cd: np.ndarray, jv: int, h: int, lay: _Layout) -> tuple[np.ndarray, np.ndarray, int, int]:
    """`_band_runs` for distinct values: the band's indices into `ud` (v at band position 2H),
    multiplicities, and the rows lo_r .. hi_r−1 of 0 .. 2H that are real values. Near the
    window's ends a pad repeats the edge value with multiplicity 0, as in `_band_runs`."""
    g, d = 2 * h, ud.size
    sb = lay.offsets + jv
    if g <= jv and jv + g < d:
        return sb, cd[sb], 0, g + 1
    real = (sb >= 0) & (sb < d)
    np.maximum(sb, 0, out=sb)
    np.minimum(sb, d - 1, out=sb)
    cb = cd[sb]
    cb[~real] = 0.0
    # Row r is distinct index jv − H + r: real for H − jv ≤ r < D − jv + H.
    return sb, cb, max(0, h - jv), min(g + 1, d - jv + h)


def _band_kdists(w: np.ndarray, sb: np.ndarray, ub: np.ndarray, k: int, lay: _Layout) -> np.ndarray:
    """The k-distance within `w` of each band value (`ub`, positions `sb` in `w`): `w` is the
    window's points (plain rule) or its distinct values (distinct rule).

    Returns FAR where the k'+1 nearest could lie beyond the fetched values: such a
    k-distance never passes the proof, and being finite it vanishes under a weight of 0.
    """
    nw = w.size
    # k-distance of each band value: its k'+1 nearest (itself included) are consecutive, so
    # kdist = min_i max(u − w[p−i], w[p+k'−i] − u). Where those runs could leave the fetched
    # values, ±inf pads make them infinitely long (so never proven).
    left = sb + lay.run_i  # position p − i (a row operand broadcasts cheaply; a column does not)
    inside = sb[0] >= k and sb[-1] + k < nw
    if inside:
        wl, wr = w[left], w[k:][left]  # w[p − i], w[p + k' − i]
    else:
        wp = np.concatenate((lay.neg, w, lay.pos))
        left += k  # the same positions in wp, which has k' pads on each side
        wl, wr = wp[left], wp[k:][left]
    np.subtract(ub, wl, out=wl)
    np.subtract(wr, ub, out=wr)
    np.maximum(wl, wr, out=wl)
    kdb = np.minimum.reduce(wl, axis=0)
    if not inside:
        # An infinite k-distance becomes FAR: still never proven (every distance the proof
        # compares it with is below FAR / 4, see local_outlier_factor); 0 · FAR = 0 below.
        np.minimum(kdb, FAR, out=kdb)
    return kdb


def _proven_lof(
    ub: np.ndarray,
    cb: np.ndarray,
    kdb: np.ndarray,
    v: float,
    h: int,
    lo_r: int,
    hi_r: int,
    left_out: float,
    right_out: float,
    lay: _Layout,
    guard: float,
) -> float | Grow | Widen:
    """LOF(V) from the band's values, multiplicities and window k-distances, if proven global.

    Returns the global LOF(V) when the window proves it; else Grow (a k-distance it read may
    reach past the window: fetch a wider one) or Widen (a neighbourhood may reach past the
    band: double H). `guard` is added to each mean reach-distance (scikit-learn's 1e-10 for
    the plain rule, whose arithmetic is kept as recorded); 0 selects the distinct rule's
    ratio form (no guard, no reciprocal).
    """
    g = 2 * h
    kd_v = kdb[g]
    # V is band position 2H; its candidate neighbours are rows r = 0..2H, row r being band
    # position H + r (distinct value jv − H + r). Rows that are V or points of N_k(V) form
    # one run r0..r1−1 (distances grow away from v on both sides); pads are cut off by index.
    # Row r's columns c = 0..2H are band positions r + c.
    near = (np.abs(ub[h + lo_r : h + hi_r] - v) <= kd_v).nonzero()[0]
    r0, r1 = lo_r + int(near[0]), lo_r + int(near[-1]) + 1
    cols, rowpos = lay.cols[r0:r1], lay.rowpos[r0:r1]
    dist = ub[cols]
    dist -= ub[rowpos]
    np.abs(dist, out=dist)
    mask = dist <= kdb[rowpos]  # mask[o, q]: q ∈ N_k(o)

    # The proof: from each q whose k-distance was read, the first double outside the window
    # (−inf / +inf when the window holds that whole side) is farther than kdist_W(q). Checked
    # first for every column of the used rows (band r0 .. r1−1+2H; usually all pass), and
    # only if that fails for the q actually read.
    span = slice(r0, r1 + g)
    ends = ub[span]
    unproven = np.minimum(ends - left_out, right_out - ends) <= kdb[span]
    if np.count_nonzero(unproven):
        unproven = unproven[cols - r0]
        unproven &= mask
        if np.count_nonzero(unproven):
            widest = float(np.maximum.reduce(kdb[cols][mask]))
            reach_out = float(np.abs(ub[cols] - v).max()) + widest
            return Grow(math.inf if widest == FAR else reach_out)

    wt = cb[cols]
    np.multiply(wt, mask, out=wt)  # multiplicity of each neighbour value (0: not one)
    if np.count_nonzero(wt[:, :: 2 * h]):  # columns 0, 2H: a neighbourhood may pass the band
        return Widen()

    # Proven: every masked k-distance is global. A row's own column (reach = its kdist)
    # counts its c − 1 other copies: subtract one copy from the sums.
    reach = kdb[cols]
    np.maximum(reach, dist, out=reach)
    reach *= wt
    n_nb = np.add.reduce(wt, axis=1)
    n_nb -= 1.0
    total = np.add.reduce(reach, axis=1)  # Σ reach-dist over N_k(o), per row o
    total -= kdb[h + r0 : h + r1]
    # V's column c is band position H + c, i.e. row c: the rows r0..r1−1 are V's neighbours,
    # V itself weighted by its c_v − 1 other copies (weight c_v in wt, so scale its term).
    at_v = h - r0
    c_v = float(wt[at_v, h])
    if not guard:
        # Distinct rule: lrd(o) / lrd(V) = (S_V / S_o) · (n_o / n_V), with S the reach sums
        # (each ≥ a k-distance > 0) and n the neighbourhood sizes. Written as ratios, not as
        # 1 / mean: a mean of sub-1e-308 distances would underflow or its reciprocal overflow.
        # A ratio past the double range (values 1e-320 apart next to values 1 apart) is +inf:
        # LOF is then that large, and +inf compares as such with the threshold.
        s_v = total[at_v]
        if s_v < 1e300 * np.minimum.reduce(total):
            ratio = np.divide(s_v, total)  # the usual case: no ratio near the double range
        else:
            with np.errstate(over="ignore"):
                ratio = np.divide(s_v, total)
        ratio *= n_nb
        ratio /= n_nb[at_v]
        ratio[at_v] = (c_v - 1.0) / c_v
        return float(wt[at_v, r0:r1] @ ratio) / float(n_nb[at_v])
    lrd = total
    lrd /= n_nb
    lrd += guard
    np.reciprocal(lrd, out=lrd)
    lrd_v = float(lrd[at_v])
    lrd[at_v] = lrd_v * ((c_v - 1.0) / c_v)
    return float(wt[at_v, r0:r1] @ lrd) / lrd_v / float(n_nb[at_v])
