"""LOF(V) of one context, compiled (numba): the number `lof.local_outlier_factor` computes
(DESIGN.md §2, both rules for duplicates), from per-cell sorted runs and the context's cells.

Inputs: the metric cell-major and ascending within each cell, the context as a boolean over
cells, and per-record arrays built once (`lof_walk.record_positions` / `record_keys` and the
merged neighbourhood; `engine.lof_checks` builds them). `lof_walk.fill` produces the context's
distinct values u_j with their counts c_j outwards from V (position 0) into two buffers.

Why no proof. The numpy code fetches a window and proves that it holds everything the result
read. Here the values come one at a time, in order of distance from v, so every quantity is
computed exactly from what it reads, and when it would read past the values fetched so far on
a side that still has more, the arithmetic stops, asks for twice as many there (`_NEED`), and
runs again (k-distances already computed are kept: they do not change as more values arrive).
- k-distance(p): with the k'+1 nearest values consecutive in 1-D, min over the k'+1 windows
  around p of max(p − s[j−i], s[j+k'−i] − p) (branch-free) — the same doubles numpy's
  `_band_kdists` takes; where ties make points and distinct values differ (plain rule) or the
  window meets an end of the context, a two-pointer merge in order of distance counting each
  value once (distinct) or c times (plain). Either gives the k'-th smallest computed distance.
- N_k(p): the contiguous run of values within k-distance(p) of p — a computed |p − o| never
  decreases as o moves away from p (IEEE subtraction is monotone), so no assumption about how
  many values tie is needed (where the numpy code widens its band).
- The arithmetic of `lof_band._proven_lof`, operation for operation: a row's own value counted
  c times and one k-distance subtracted; the distinct rule's ratios (S_V / S_o)·(n_o / n_V), not
  1 / mean (sub-1e-308 distances); the plain rule's lrd = 1 / (mean + 1e-10). Only the order of
  the sums differs, so scores agree to rounding (tests: rtol 1e-9) and sums that are exact
  (small integers) give the same double.
Rules: distinct — k' = min(k, D − 1): below k only when both sides run out with fewer than k
other values (then D − 1 is their number); NaN for N < 2 or D = 1. Plain — k' = min(k, N − 1);
LOF = 1 exactly for a constant population or when V has more than k' copies (kdist(V) = 0 and
every lrd involved is 1/1e-10). Values spanning FAR / 4 or more: status TOO_WIDE, and the
caller raises lof's UserError through the numpy path.

Costs per check: O(cells) for membership (`jit.member_cells`), O(member cells) for N, V's copies,
min and max (contiguous per-record arrays); about
2k'–3k' distinct values per side from the walk; O(k'²) arithmetic. Memory: O(k + member cells),
never O(N). Measured (10M rows, 1,200 cells, 3,000 random contexts, `python -m benchmarks per-check
--rows 10000000 --contexts 3000`, CPU time at load 1.0): 10.0 µs per check through the evaluator
(distinct rule; plain 11.1) against 150 µs for the numpy reference, where membership in Python and
a 13-argument call made it 14.9 µs. Of the 8.9 µs of one `lof_context` call, membership,
dispatch and the O(member cells) pass take ~3.1 µs (`member_cells` alone ~1.4), the walk and the
arithmetic the rest.
Compiling costs ~10–25 s once (load-dependent; 9.7–10.0 s at load 1, of which ~0.8 s is
`jit.member_cells`, which the moment kernels share); `cache=True` keeps the machine code beside the
module (or in numba's user cache when that is read-only), so later processes load it in ~1 s.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled_with, member_cells_indexed
from pcor_sql.core.verifiers.lof_walk import DONE, FROM, MODE, N_SIDE, NEAR_AT, STATE_SLOTS, fill

FAR = np.finfo(np.float64).max
LRD_GUARD = 1e-10  # scikit-learn's guard, plain rule only (lof_band.LRD_GUARD)
DISTINCT_RULE = 0
PLAIN_RULE = 1
TOO_WIDE = 2  # status: the values span FAR / 4 or more (the caller raises lof's UserError)
_OK = 0
_NEED = 3  # internal: + side, fetch more values on that side and compute again
# `pack_record`'s layout. ints: these slots, then starts (cells + 1), pos (4 × cells), near_c,
# flat (cells × width); floats: v, near_share, then keys (6 × cells), near_v.
I_CELLS, I_NEAR, I_WIDTH, I_BELOW, I_UPTO, I_K, I_RULE = range(7)
I_HEAD = 8
F_V, F_SHARE = 0, 1
F_HEAD = 2


@compiled_with(nogil=True, error_model="numpy")
def _kd_range(a, b, kk, rule, kd, bv, bc, center, st):
    """k-distances of positions a..b (relative to V), remembered in kd: _OK, or _NEED + side
    when a side must be fetched further first."""
    nl, nr = st[N_SIDE], st[N_SIDE + 1]
    for j in range(a, b + 1):
        i = center + j
        if not np.isnan(kd[i]):
            continue
        u = bv[i]
        lo, hi = j - kk, j + kk  # the values a window of k' + 1 around j reads
        if lo < -nl and not st[DONE]:
            return _NEED
        if hi > nr and not st[DONE + 1]:
            return _NEED + 1
        if lo >= -nl and hi <= nr:
            ties = 1.0
            if rule == PLAIN_RULE:
                for q in range(lo, hi + 1):
                    ties = max(ties, bc[center + q])
            if ties == 1.0:
                # The k'+1 nearest (u itself included) are consecutive: kdist = min over windows
                # of max(u − s[j−i], s[j+k'−i] − u) — branch-free. Under the plain rule only
                # without ties here (then points and distinct values coincide).
                d = np.inf
                for t in range(kk + 1):
                    left = u - bv[i - t]
                    right = bv[i + kk - t] - u
                    d = min(d, max(left, right))
                kd[i] = d
                continue
        # Near an end of the context, or ties under the plain rule: merge outwards (two
        # pointers, ascending distance; each point of a value counts under the plain rule).
        need = float(kk) if rule == DISTINCT_RULE else float(kk) - (bc[i] - 1.0)
        d = 0.0
        lo, hi = j - 1, j + 1
        while need > 0.0:
            if lo < -nl and not st[DONE]:
                return _NEED
            if hi > nr and not st[DONE + 1]:
                return _NEED + 1
            da = u - bv[center + lo] if lo >= -nl else np.inf
            db = bv[center + hi] - u if hi <= nr else np.inf
            if da == np.inf and db == np.inf:
                break  # not reached: k' ≤ D − 1 (distinct) or N − 1 (plain) other values exist
            if da <= db:
                d = da
                w = bc[center + lo]
                lo -= 1
            else:
                d = db
                w = bc[center + hi]
                hi += 1
            need -= 1.0 if rule == DISTINCT_RULE else w
        kd[i] = d
    return _OK


@compiled_with(nogil=True)
def _nbhd(j, kd, bv, center, st):
    """(first, last position of N_k(o) ∪ {o}, status) for o at position j (kd[j] known)."""
    nl, nr = st[N_SIDE], st[N_SIDE + 1]
    i = center + j
    u, ko = bv[i], kd[i]
    lo = j
    while True:
        if lo - 1 < -nl:
            if not st[DONE]:
                return lo, j, _NEED
            break
        if u - bv[center + lo - 1] > ko:
            break
        lo -= 1
    hi = j
    while True:
        if hi + 1 > nr:
            if not st[DONE + 1]:
                return lo, hi, _NEED + 1
            break
        if bv[center + hi + 1] - u > ko:
            break
        hi += 1
    return lo, hi, _OK


@compiled_with(nogil=True, error_model="numpy")
def _lof_buffered(v, cv, kk, rule, kd, bv, bc, center, st):
    """(LOF(V), status) from the values fetched so far (st: how many per side, which sides are
    done); status _NEED + side asks for more on that side. The arithmetic of
    `lof_band._proven_lof`: a row's own column counted c times and one k-distance subtracted."""
    # Three rounds, each one call site (every call site is compiled into this function): the
    # k-distance of V, then of N_k(V), then of the neighbourhoods of those.
    lv, rv = 0, 0
    a, b = 0, 0
    spans = np.empty((0, 2), dtype=np.int64)
    for phase in range(3):
        status = _kd_range(a, b, kk, rule, kd, bv, bc, center, st)
        if status != _OK:
            return np.nan, status
        if phase == 2:
            break
        # phase 0: N_k(V) (rows lv..rv); phase 1: the neighbourhood of each o ∈ N_k(V).
        first, last = (0, 0) if phase == 0 else (lv, rv)
        spans = np.empty((last - first + 1, 2), dtype=np.int64)
        for j in range(first, last + 1):
            lo, hi, status = _nbhd(j, kd, bv, center, st)
            if status != _OK:
                return np.nan, status
            spans[j - first, 0], spans[j - first, 1] = lo, hi
            a, b = (lo, hi) if j == first else (min(a, lo), max(b, hi))
        if phase == 0:
            lv, rv = a, b
    width = rv - lv + 1
    sums = np.empty(width)
    sizes = np.empty(width)
    for j in range(lv, rv + 1):
        u, total, count = bv[center + j], 0.0, 0.0
        for q in range(spans[j - lv, 0], spans[j - lv, 1] + 1):
            kq, dist = kd[center + q], abs(bv[center + q] - u)
            total += bc[center + q] * (kq if kq > dist else dist)
            count += bc[center + q]
        sums[j - lv] = total - kd[center + j]  # o's own column counted c_o times: one copy less
        sizes[j - lv] = count - 1.0
    s_v, n_v = sums[-lv], sizes[-lv]
    acc = 0.0
    if rule == DISTINCT_RULE:
        # lrd(o) / lrd(V) = (S_V / S_o) · (n_o / n_V): ratios, not 1 / mean (a mean of sub-1e-308
        # distances would underflow, or its reciprocal overflow).
        for j in range(lv, rv + 1):
            if j == 0:
                ratio = (cv - 1.0) / cv
            else:
                ratio = s_v / sums[j - lv]
                ratio *= sizes[j - lv]
                ratio /= n_v
            acc += bc[center + j] * ratio
        return acc / n_v, _OK
    lrd_v = 1.0 / (s_v / n_v + LRD_GUARD)
    for j in range(lv, rv + 1):
        if j == 0:
            lrd = lrd_v * ((cv - 1.0) / cv)
        else:
            lrd = 1.0 / (sums[j - lv] / sizes[j - lv] + LRD_GUARD)
        acc += bc[center + j] * lrd
    return acc / lrd_v / n_v, _OK


@compiled_with(nogil=True)
def _moved(a, center, new_center, fill):
    out = np.full(2 * new_center + 1, fill)
    out[new_center - center : new_center + center + 1] = a
    return out


@compiled_with(nogil=True, inline="always")
def _grown(status, want_l, want_r, st, bv, bc, kd, center):
    """After `_lof_buffered` asked for more rows (`_NEED`: on the left, else on the right): the
    side asked for wants twice what it holds, and the buffers grow 4× once a side outgrows them
    (the three LOF walks — runs, window counts, a node's neighbours — grow alike)."""
    if status == _NEED:
        want_l = 2 * max(want_l, st[N_SIDE])
    else:
        want_r = 2 * max(want_r, st[N_SIDE + 1])
    if max(want_l, want_r) > center - 1:
        bigger = 4 * center
        bv = _moved(bv, center, bigger, 0.0)
        bc = _moved(bc, center, bigger, 0.0)
        kd = _moved(kd, center, bigger, np.nan)
        center = bigger
    return want_l, want_r, bv, bc, kd, center


@compiled_with(nogil=True, error_model="numpy")
def lof_score(values, starts, member, pos, keys, near_v, near_c, v, near_below, near_upto, near_share, k, rule):
    """`_score` of the context `member` (boolean over cells): the kernel on its own, for tests."""
    inside = np.empty(member.size, dtype=np.int64)
    m = 0
    for c in range(member.size):
        if member[c]:
            inside[m] = c
            m += 1
    return _score(values, starts, member, inside, m, pos, keys, near_v, near_c, v, near_below, near_upto,
                  near_share, k, rule)


@compiled_with(nogil=True, inline="always")
def unpack_record(ints, floats):
    """The arrays `pack_record` packed, as views: (cells, starts, pos, near_c, flat, index, keys,
    near_v)."""
    cells, n_near, width = ints[I_CELLS], ints[I_NEAR], ints[I_WIDTH]
    o = I_HEAD
    starts = ints[o : o + cells + 1]
    o += cells + 1
    pos = ints[o : o + 4 * cells].reshape((4, cells))
    o += 4 * cells
    near_c = ints[o : o + n_near]
    o += n_near
    flat = ints[o : o + cells * width].reshape((cells, width))
    o += cells * width
    index = ints[o:]
    keys = floats[F_HEAD : F_HEAD + 6 * cells].reshape((6, cells))
    near_v = floats[F_HEAD + 6 * cells : F_HEAD + 6 * cells + n_near]
    return cells, starts, pos, near_c, flat, index, keys, near_v


@compiled_with(nogil=True, error_model="numpy")
def lof_context(x, words, values, ints, floats):
    """(LOF(V), N, status) of the context (x, words: `jit.context_words`) on a record packed by
    `pack_record`: membership (`jit.member_cells`) and `_score` in one call — five arguments,
    since numba's dispatch costs about 0.15 µs per array argument."""
    cells, starts, pos, near_c, flat, index, keys, near_v = unpack_record(ints, floats)
    inside = np.empty(cells, dtype=np.int64)
    m = member_cells_indexed(x, words, flat, index, inside)
    member = np.zeros(cells, dtype=np.bool_)
    for j in range(m):
        member[inside[j]] = True
    return _score(values, starts, member, inside, m, pos, keys, near_v, near_c, floats[F_V], ints[I_BELOW],
                  ints[I_UPTO], floats[F_SHARE], ints[I_K], ints[I_RULE])


def pack_record(starts, pos, keys, near_v, near_c, v, near_below, near_upto, near_share, k, rule, flat, index):
    """(ints, floats): a record's arrays and scalars, the context bits of each cell (`flat`,
    `jit.flat_bits`) and the cells of each value (`index`, `jit.cell_index`), as the two arrays
    `lof_context` reads (layout: the I_* and F_* slots)."""
    cells, width = flat.shape
    head = np.zeros(I_HEAD, dtype=np.int64)
    head[[I_CELLS, I_NEAR, I_WIDTH, I_BELOW, I_UPTO, I_K, I_RULE]] = (
        cells, near_v.size, width, near_below, near_upto, k, rule)
    ints = np.concatenate([head, starts, pos.ravel(), near_c, flat.ravel(), index]).astype(np.int64, copy=False)
    floats = np.concatenate([[v, near_share], keys.ravel(), near_v]).astype(np.float64, copy=False)
    return np.ascontiguousarray(ints), np.ascontiguousarray(floats)


def repack_positions(ints, floats, pos, keys):
    """Overwrite, in place, the positions and keys of a record packed without merged rows (a
    widened window walk's: the context bits and cell index, most of the arrays, stay as packed)."""
    cells = ints[I_CELLS]
    if ints[I_NEAR] != 0 or pos.shape != (4, cells) or keys.shape != (6, cells):
        raise ValueError("repack_positions: the record has merged rows or another shape; pack it afresh")
    ints[I_HEAD + cells + 1 : I_HEAD + 5 * cells + 1] = pos.ravel()
    floats[F_HEAD : F_HEAD + 6 * cells] = keys.ravel()


# Inlined into its two callers (numba IR): compiled as a function of its own, its machine code
# would be optimized once alone and again inside `lof_context` (+4 s of a cold compile).
@compiled_with(nogil=True, error_model="numpy", inline="always")
def _score(values, starts, member, inside, m, pos, keys, near_v, near_c, v, near_below, near_upto, near_share, k,
           rule):
    """(LOF(V), N, status) of the context `member` (boolean over cells; `inside[:m]` its cells,
    ascending) under `rule`
    (DISTINCT_RULE or PLAIN_RULE): NaN when N < 2, or (distinct) a single distinct value; 1.0
    for a constant population under the plain rule; status TOO_WIDE when the values span
    FAR / 4 or more (LOF's distances could overflow: the caller raises lof's UserError).
    `pos` (4, cells): per cell the first position ≥ v, > v, ≥ a, > b, with [a, b] the merged
    neighbourhood `near_v` (cells `near_c`; near_below / near_upto: its entries < v / ≤ v);
    `keys`: `record_keys(values, starts, pos)`. The neighbourhood serves the walk when the
    context holds at least `near_share` of the table's rows."""
    n = 0
    cv = 0
    m_cells = 0
    lo, hi = np.inf, -np.inf
    for j in range(m):
        c = inside[j]
        a, b = starts[c], starts[c + 1]
        if b > a:
            n += b - a
            cv += pos[1, c] - pos[0, c]
            m_cells += 1
            if keys[4, c] < lo:
                lo = keys[4, c]
            if keys[5, c] > hi:
                hi = keys[5, c]
    if n < 2:
        return np.nan, n, _OK
    if lo == hi:
        # Plain: every lrd is 1/1e-10, LOF = 1; distinct: no point has another value, undefined.
        return (1.0 if rule == PLAIN_RULE else np.nan), n, _OK
    if not hi - lo < FAR / 4:
        return np.nan, n, TOO_WIDE
    kk = min(k, n - 1) if rule == PLAIN_RULE else k
    if rule == PLAIN_RULE and cv - 1 >= kk:
        # More than k' copies of v: kdist(V) = 0, N_k(V) is V's copies, all with k-distance 0:
        # every lrd involved is 1/1e-10 and LOF(V) = 1 exactly.
        return 1.0, n, _OK
    return walk_score(values, starts, member, inside, m, pos, keys, near_v, near_c, v, near_below, near_upto,
                      near_share, k, rule, n, cv, m_cells, kk)


@compiled_with(nogil=True, error_model="numpy", inline="always")
def walk_score(values, starts, member, inside, m, pos, keys, near_v, near_c, v, near_below, near_upto, near_share, k,
               rule, n, cv, m_cells, kk):
    """`_score` past its O(member cells) prologue: N, V's copies cv, the member cells with rows
    and k' given (the population neither tiny, constant nor too wide). `m` < 0: the member
    cells are not listed, and a heap reads them off `member` (`lof_walk.fill`)."""
    st = np.zeros(STATE_SLOTS, dtype=np.int64)
    st[FROM] = 2
    if near_v.size > 0 and float(n) >= near_share * float(starts[starts.size - 1] - starts[0]):
        st[NEAR_AT] = near_below - 1
        st[NEAR_AT + 1] = near_upto
    else:
        # Too small a share of the rows: an empty walk of the neighbourhood, then the heap over
        # the member runs from v itself (rows 0, 1 of pos and keys instead of 2, 3).
        st[NEAR_AT] = -1
        st[NEAR_AT + 1] = near_v.size
        st[FROM] = 0
    hk = np.empty((2, m_cells))
    hc = np.empty((2, m_cells), dtype=np.int64)
    hp = np.empty((2, m_cells), dtype=np.int64)
    center = 4 * k + 16
    bv = np.empty(2 * center + 1)
    bc = np.empty(2 * center + 1)
    kd = np.full(2 * center + 1, np.nan)  # remembered k-distances
    bv[center], bc[center] = v, float(cv)
    # Values per side fetched before the first try: measured on the scale table (k = 20), a
    # check reads about 2k + 4 per side; fewer cost a second round of the arithmetic.
    want_l = want_r = 2 * k + 4
    while True:
        for side in range(2):  # one call site: each one is compiled into this function
            fill(side, want_r if side else want_l, st, bv, bc, center, values, starts, member, inside, m, pos, keys,
                 near_v, near_c, hk[side], hc[side], hp[side])
        if rule == DISTINCT_RULE and kk == k:
            # k' = min(k, D − 1): below k only when both sides run out before k other values.
            nl, nr = st[N_SIDE], st[N_SIDE + 1]
            if nl + nr < k and st[DONE] and st[DONE + 1]:
                kk = nl + nr
                if kk == 0:
                    return np.nan, n, _OK
        score, status = _lof_buffered(v, float(cv), kk, rule, kd, bv, bc, center, st)
        if status == _OK:
            return score, n, _OK
        want_l, want_r, bv, bc, kd, center = _grown(status, want_l, want_r, st, bv, bc, kd, center)
