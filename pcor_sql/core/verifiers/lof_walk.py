"""The walk behind the compiled LOF check (`lof_kernel`): a context's distinct values with their
counts, outwards from the record's value v, produced only as far as the arithmetic asks.

A context is a set of member cells; the metric is cell-major, ascending within each cell
(`values`, run c is `starts[c] .. starts[c+1]`). Per record, once (`record_positions`,
`record_keys`: O(cells · log rows)): where v sits in every run, where the merged neighbourhood
[a, b] ∋ v begins and ends in it, and the values found there (heap keys, run minima and maxima)
copied contiguous — read from the runs, each would be a cache miss per member cell per check.
The merged neighbourhood is every cell's values in [a, b], ascending, with their cells.

Per side, `_fill` appends the next distinct value and its count in the context: first from the
merged neighbourhood, skipping entries of cells outside the context (contiguous memory: a few
ns an entry), then, past its end or for a context too small for it to pay, from a min-heap over
the member runs keyed by the distance from v; a cell's copies of one value are skipped by
galloping, so a value held many times costs O(log copies) per cell. Every value of every cell
in [a, b] is in the neighbourhood, and the heap starts each run just beyond it, so the sequence
is exactly the context's distinct values in order of distance from v on that side.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import compiled_with, first_position

# State slots (an int64 array shared by the helpers: numba has no mutable record that caches).
N_SIDE = 0  # + side (0 below v, 1 above): distinct values produced on that side
DONE = 2  # + side: that side has no more values
NEAR_AT = 4  # + side: next index of the merged neighbourhood to read
HEAP_SIZE = 6  # + side
MODE = 8  # + side: 0 while the merged neighbourhood serves that side, 1 once the heap does
FROM = 10  # the rows of pos / keys where a heap starts: 2 (past the neighbourhood) or 0 (at v)
STATE_SLOTS = 11


@compiled_with(nogil=True)
def record_positions(values, starts, v, a, b):
    """(4, cells) int64: per cell the first position with x ≥ v, x > v, x ≥ a and x > b."""
    cells = starts.size - 1
    pos = np.empty((4, cells), dtype=np.int64)
    for c in range(cells):
        lo, hi = starts[c], starts[c + 1]
        pos[0, c] = first_position(values, lo, hi, v, False)
        pos[1, c] = first_position(values, pos[0, c], hi, v, True)
        pos[2, c] = first_position(values, lo, pos[0, c], a, False)
        pos[3, c] = first_position(values, pos[1, c], hi, b, True)
    return pos


@compiled_with(nogil=True, inline="always")
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


@compiled_with(nogil=True, inline="always")
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


@compiled_with(nogil=True)
def fill(side, target, st, bv, bc, center, values, starts, member, inside, n_inside, pos, keys, near_v, near_c, hk, hc,
         hp):
    """Append the context's next distinct values on `side` (0: below v, into bv[center − 1],
    [center − 2], ...; 1: above v, into bv[center + 1], ...) with their counts, until that side
    holds `target` of them, has no more (st[DONE + side] = 1), or the buffer is full. `member`:
    the context as a boolean over cells; `inside[:n_inside]`: its cells, ascending (n_inside < 0:
    not listed, read off `member` when a heap needs them)."""
    n = st[N_SIDE + side]
    cap = center - 1
    while n < target and n < cap and not st[DONE + side]:
        x = 0.0
        count = 0.0
        if st[MODE + side] == 0:
            # The merged neighbourhood: skip other cells' entries; group the copies of a value.
            at = st[NEAR_AT + side]
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
            st[NEAR_AT + side] = at
            if count == 0.0:
                # Past the neighbourhood: the member runs beyond it, through a heap.
                st[MODE + side] = 1
                row = st[FROM] + side
                st[HEAP_SIZE + side] = _heap_init(side, member, inside, n_inside, pos[row], keys[row], hk, hc, hp)
        if count == 0.0:
            size = st[HEAP_SIZE + side]
            if size == 0:
                st[DONE + side] = 1
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
            st[HEAP_SIZE + side] = size
        idx = center - 1 - n if side == 0 else center + 1 + n
        bv[idx] = x
        bc[idx] = count
        n += 1
        st[N_SIDE + side] = n


@compiled_with(nogil=True)
def _heap_init(side, member, inside, n_inside, from_pos, from_key, hk, hc, hp):
    """A min-heap on the distance from v of each member cell's next value beyond `from_pos`
    (its key, −x on the left and x on the right, precomputed per record in `from_key`: reading
    it from the runs would be a cache miss per cell); its size. n_inside < 0: the member cells
    are read off `member` (ascending, as `inside` lists them)."""
    size = 0
    count = n_inside if n_inside >= 0 else member.size
    for j in range(count):  # ascending cells: the same heap as a scan of all cells would build
        c = inside[j] if n_inside >= 0 else j
        if n_inside < 0 and not member[c]:
            continue
        if not np.isnan(from_key[c]):
            hk[size] = from_key[c]
            hc[size] = c
            hp[size] = from_pos[c] - 1 if side == 0 else from_pos[c]
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(hk, hc, hp, size, i)
    return size


@compiled_with(nogil=True)
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
