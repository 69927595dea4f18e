"""LOF(V) of one context, compiled (numba): the same number as `lof.local_outlier_factor`
(DESIGN.md §2, both rules for duplicates), read straight from per-cell sorted runs.

Input. The metric cell-major and ascending within each cell (`values`, run c is
`starts[c] .. starts[c+1]`), the context as a boolean over cells (`member`), the record's value
v, and per record (built once by `record_positions`, O(cells · log rows)): where v sits in each
run (`lo_pos[c]` first x ≥ v, `hi_pos[c]` first x > v) and a merged neighbourhood `near` — every
value of every cell in [near_lo, near_hi] ∋ v, ascending, with its cell.

How. Every quantity depends on a point only through its value, so the work is on the context's
distinct values u_j with their multiplicities c_j, indexed from V (j = 0) outwards. They are
produced lazily, one side at a time, only as far as a computation asks: first by walking `near`
and skipping the entries of cells outside the context (when the context holds enough of the
rows for that to be short), then by a heap over the member cells' runs (min-heap on the
distance from v; a cell's copies of one value are skipped by galloping, so a tie-heavy value
costs O(log copies) per cell, not O(copies)). Nothing is proven or guessed: each k-distance is
computed exactly by merging outwards from its point (two pointers, ascending distance; the
k'-th distance is the same double whichever of two equal distances is taken first), each
neighbourhood N_k(p) is the contiguous run of values within k-distance(p) of p (in 1-D a
computed |p − o| never decreases as o moves away from p: IEEE subtraction is monotone), and
k-distances are remembered per value. So the window the numpy code must prove is never needed.

Rules (as `lof.py`): distinct — k' = min(k, D − 1), the k'-th nearest other distinct value; D is
known only when both sides run out while computing V's own k-distance (then D − 1 < k); the
ratio form of lrd(o)/lrd(V) (no guard). Plain — k' = min(k, N − 1) with multiplicities (p's
own c_p − 1 copies at distance 0 first), lrd = 1/(mean reach + 1e-10), and LOF(V) = 1 exactly
when V has more than k' copies. The arithmetic follows `lof_band._proven_lof` operation by
operation (a row's own column counted c times and one k-distance subtracted; the same ratios),
so only the order of the sums differs from the reference: scores agree to rounding (tests: rtol
1e-9), and cases whose sums are exact (small integers) give the same double.

Costs per check: O(cells) for N, V's copies, min and max; then O(values walked) — about 3k'
distinct values per side, times the near entries skipped per value (at most `near` per side),
or times log(member cells) per value from the heap (plus O(member cells) to build it). Memory
per check: O(k + member cells), never O(N).

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

FAR = np.finfo(np.float64).max
LRD_GUARD = 1e-10  # scikit-learn's guard, plain rule only (lof_band.LRD_GUARD)
TOO_WIDE = 2  # status: the values span FAR / 4 or more (the caller raises lof's UserError)
_OK = 0
_NEED = 3  # internal: + side, fetch more values on that side and compute again
DISTINCT_RULE = 0
PLAIN_RULE = 1
# State slots (an int64 array shared by the helpers: numba has no mutable records that cache).
_N_SIDE = 0  # + side (0 left, 1 right): distinct values produced on that side
_DONE = 2  # + side: that side ran out of values
_NEAR_AT = 4  # + side: next index of `near` to read (−1: the heap serves that side)
_HEAP_SIZE = 6  # + side
_MODE = 8  # + side: 0 while the merged neighbourhood serves that side, 1 once the heap does
_FROM = 10  # the rows of pos / keys where a heap starts: 2 (past the neighbourhood) or 0 (at v)


@njit(cache=True, nogil=True)
def _first(values, lo, hi, x, right):
    """The first position in run [lo, hi) with value ≥ x (right: > x)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x or (right and values[mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def record_positions(values, starts, v, a, b):
    """(4, cells) int64: per cell the first position with x ≥ v, x > v, x ≥ a and x > b."""
    cells = starts.size - 1
    pos = np.empty((4, cells), dtype=np.int64)
    for c in range(cells):
        lo, hi = starts[c], starts[c + 1]
        pos[0, c] = _first(values, lo, hi, v, False)
        pos[1, c] = _first(values, pos[0, c], hi, v, True)
        pos[2, c] = _first(values, lo, pos[0, c], a, False)
        pos[3, c] = _first(values, pos[1, c], hi, b, True)
    return pos


@njit(cache=True, nogil=True, inline="always")
def _sift_down(hk, hc, hp, size, i):
    key, cell, ptr = hk[i], hc[i], hp[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and hk[child + 1] < hk[child]:
            child += 1
        if hk[child] >= key:
            break
        hk[i], hc[i], hp[i] = hk[child], hc[child], hp[child]
        i = child
    hk[i], hc[i], hp[i] = key, cell, ptr


@njit(cache=True, nogil=True, inline="always")
def _skip_copies(values, lo, hi, p, x, side):
    """From p (values[p] == x, run [lo, hi)) the first position past x's copies: moving left
    (side 0; may be lo − 1) or right (may be hi). Galloping, so many copies cost O(log)."""
    if side == 0:
        if p - 1 < lo or values[p - 1] != x:
            return p - 1
        step = 1
        good = p - 1  # values[good] == x
        while good - step >= lo and values[good - step] == x:
            good -= step
            step *= 2
        a, b = max(lo, good - step), good  # the first copy is in [a, b]
        while a < b:
            mid = (a + b) >> 1
            if values[mid] == x:
                b = mid
            else:
                a = mid + 1
        return a - 1
    if p + 1 >= hi or values[p + 1] != x:
        return p + 1
    step = 1
    good = p + 1
    while good + step < hi and values[good + step] == x:
        good += step
        step *= 2
    a, b = good + 1, min(hi, good + step)  # the first position past the copies is in [a, b]
    while a < b:
        mid = (a + b) >> 1
        if values[mid] == x:
            a = mid + 1
        else:
            b = mid
    return a


@njit(cache=True, nogil=True)
def _fill(side, target, st, bv, bc, center, values, starts, member, pos, keys, near_v, near_c, hk, hc, hp):
    """Append the context's next distinct values on `side` (0: below v, into bv[center − 1],
    [center − 2], ...; 1: above v, into bv[center + 1], ...) with their counts, until that side
    holds `target` of them, has no more (st[_DONE + side] = 1), or the buffer is full."""
    n = st[_N_SIDE + side]
    cap = center - 1
    while n < target and n < cap and not st[_DONE + side]:
        x = 0.0
        count = 0.0
        if st[_MODE + side] == 0:
            # The merged neighbourhood: skip other cells' entries; group the copies of a value.
            at = st[_NEAR_AT + side]
            if side == 0:
                while at >= 0 and not member[near_c[at]]:
                    at -= 1
                if at >= 0:
                    x = near_v[at]
                    while at >= 0 and near_v[at] == x:
                        if member[near_c[at]]:
                            count += 1.0
                        at -= 1
            else:
                m = near_v.size
                while at < m and not member[near_c[at]]:
                    at += 1
                if at < m:
                    x = near_v[at]
                    while at < m and near_v[at] == x:
                        if member[near_c[at]]:
                            count += 1.0
                        at += 1
            st[_NEAR_AT + side] = at
            if count == 0.0:
                # Past the neighbourhood: the member runs beyond it, through a heap.
                st[_MODE + side] = 1
                row = st[_FROM] + side
                st[_HEAP_SIZE + side] = _heap_init(side, member, pos[row], keys[row], hk, hc, hp)
        if count == 0.0:
            size = st[_HEAP_SIZE + side]
            if size == 0:
                st[_DONE + side] = 1
                break
            key = hk[0]
            x = -key if side == 0 else key
            while size > 0 and hk[0] == key:
                c, p = hc[0], hp[0]
                q = _skip_copies(values, starts[c], starts[c + 1], p, x, side)
                count += float(p - q) if side == 0 else float(q - p)
                if (side == 0 and q < starts[c]) or (side == 1 and q >= starts[c + 1]):
                    size -= 1
                    hk[0], hc[0], hp[0] = hk[size], hc[size], hp[size]
                else:
                    hk[0] = -values[q] if side == 0 else values[q]
                    hp[0] = q
                _sift_down(hk, hc, hp, size, 0)
            st[_HEAP_SIZE + side] = size
        idx = center - 1 - n if side == 0 else center + 1 + n
        bv[idx] = x
        bc[idx] = count
        n += 1
        st[_N_SIDE + side] = n


@njit(cache=True, nogil=True)
def _heap_init(side, member, from_pos, from_key, hk, hc, hp):
    """A min-heap on the distance from v of each member cell's next value beyond `from_pos`
    (its key, −x on the left and x on the right, precomputed per record in `from_key`: reading
    it from the runs would be a cache miss per cell); its size."""
    size = 0
    for c in range(member.size):
        if member[c] and not np.isnan(from_key[c]):
            hk[size] = from_key[c]
            hc[size] = c
            hp[size] = from_pos[c] - 1 if side == 0 else from_pos[c]
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(hk, hc, hp, size, i)
    return size


@njit(cache=True, nogil=True)
def record_keys(values, starts, pos):
    """(6, cells): rows 0–3 the heap keys of `pos` (first ≥ v, first > v, first ≥ a, first > b):
    −x of the value before a left position, x of the value at a right one, NaN when the run has
    none; rows 4, 5 each run's minimum and maximum. Contiguous per record: read from the runs,
    each would be a cache miss per cell per check (80 ns at 10M rows)."""
    cells = starts.size - 1
    keys = np.full((6, cells), np.nan)
    for c in range(cells):
        for r in range(4):
            p = pos[r, c]
            if r % 2 == 0:
                if p - 1 >= starts[c]:
                    keys[r, c] = -values[p - 1]
            elif p < starts[c + 1]:
                keys[r, c] = values[p]
        if starts[c + 1] > starts[c]:
            keys[4, c] = values[starts[c]]
            keys[5, c] = values[starts[c + 1] - 1]
    return keys


@njit(cache=True, nogil=True, error_model="numpy")
def _kd_range(a, b, kk, rule, kd, bv, bc, center, st):
    """k-distances of positions a..b (relative to V), remembered in kd: _OK, or _NEED + side
    when a side must be fetched further first."""
    nl, nr = st[_N_SIDE], st[_N_SIDE + 1]
    for j in range(a, b + 1):
        i = center + j
        if not np.isnan(kd[i]):
            continue
        u = bv[i]
        lo, hi = j - kk, j + kk  # the values a window of k' + 1 around j reads
        if lo < -nl and not st[_DONE]:
            return _NEED
        if hi > nr and not st[_DONE + 1]:
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
            if lo < -nl and not st[_DONE]:
                return _NEED
            if hi > nr and not st[_DONE + 1]:
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


@njit(cache=True, nogil=True)
def _nbhd(j, kd, bv, center, st):
    """(first, last position of N_k(o) ∪ {o}, status) for o at position j (kd[j] known)."""
    nl, nr = st[_N_SIDE], st[_N_SIDE + 1]
    i = center + j
    u, ko = bv[i], kd[i]
    lo = j
    while True:
        if lo - 1 < -nl:
            if not st[_DONE]:
                return lo, j, _NEED
            break
        if u - bv[center + lo - 1] > ko:
            break
        lo -= 1
    hi = j
    while True:
        if hi + 1 > nr:
            if not st[_DONE + 1]:
                return lo, hi, _NEED + 1
            break
        if bv[center + hi + 1] - u > ko:
            break
        hi += 1
    return lo, hi, _OK


@njit(cache=True, nogil=True, error_model="numpy")
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


@njit(cache=True, nogil=True)
def _moved(a, center, new_center, fill):
    out = np.full(2 * new_center + 1, fill)
    out[new_center - center : new_center + center + 1] = a
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def lof_score(values, starts, member, pos, keys, near_v, near_c, v, near_below, near_upto, near_share, k, rule):
    """(LOF(V), N, status) of the context `member` (boolean over cells) under `rule`
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
    for c in range(member.size):
        if member[c]:
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
    st = np.zeros(11, dtype=np.int64)
    st[_FROM] = 2
    if near_v.size > 0 and float(n) >= near_share * float(starts[starts.size - 1] - starts[0]):
        st[_NEAR_AT] = near_below - 1
        st[_NEAR_AT + 1] = near_upto
    else:
        # Too small a share of the rows: an empty walk of the neighbourhood, then the heap over
        # the member runs from v itself (rows 0, 1 of pos and keys instead of 2, 3).
        st[_NEAR_AT] = -1
        st[_NEAR_AT + 1] = near_v.size
        st[_FROM] = 0
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
            _fill(side, want_r if side else want_l, st, bv, bc, center, values, starts, member, pos, keys, near_v,
                  near_c, hk[side], hc[side], hp[side])
        if rule == DISTINCT_RULE and kk == k:
            # k' = min(k, D − 1): below k only when both sides run out before k other values.
            nl, nr = st[_N_SIDE], st[_N_SIDE + 1]
            if nl + nr < k and st[_DONE] and st[_DONE + 1]:
                kk = nl + nr
                if kk == 0:
                    return np.nan, n, _OK
        score, status = _lof_buffered(v, float(cv), kk, rule, kd, bv, bc, center, st)
        if status == _OK:
            return score, n, _OK
        if status == _NEED:
            want_l = 2 * max(want_l, st[_N_SIDE])
        else:
            want_r = 2 * max(want_r, st[_N_SIDE + 1])
        if max(want_l, want_r) > center - 1:
            bigger = 4 * center
            bv = _moved(bv, center, bigger, 0.0)
            bc = _moved(bc, center, bigger, 0.0)
            kd = _moved(kd, center, bigger, np.nan)
            center = bigger
