"""One LOF or histogram check of a large context without a walk: N by inclusion–exclusion over
the grid's marginal sums, the rows per window value from the window's entries in value order,
each entry's cell tested for membership.

A window walk (`window_counts.move`) pays each check the slab of cells its move enters or
leaves: on the births shape a check of the full context after one of its neighbours reads
1,680-12,240 cells and their entries, 75-140 µs, most of it cache misses on strided cells.
What a check of a large context needs is much less (DESIGN.md §2, validity is public structure):

- N. The rows of every grid point (`jit.cell_index`'s value combinations) form a tensor R; per
  attribute j an extra index ALL_j holds R summed over j (and, all combinations of such sums,
  the extended tensor T of shape Π (D_j + 1)). A context is a product S_0 × … × S_{m−1}, so
  N = Σ over S of R, and Σ_{d ∈ S_j} = Σ_all − Σ_{d ∉ S_j}: per attribute take the shorter of
  S_j (signs +1) and {ALL_j (+1)} ∪ complement (−1). N is then Π_j min(|S_j|, 1 + |C_j|) reads
  of T — one for the full context, two for one of its neighbours. Exact: integer sums.
- The rows per window value, outwards from v only as far as the verdict reads. The window's
  entries (`window_counts.window_entries`: per cell, (value index, copies)) are regrouped by
  value, each with its cell's context bits (`jit.flat_bits`' row): a value's count in the
  context is the sum of the copies of its entries whose cell has every bit in the context;
  or, where the context's missing values hold fewer entries, the value's rows in the table
  less its entries in cells missing one of them, each such cell counted once, at its first
  missing attribute (the same entries grouped by (bit, value)): the full context reads none,
  a neighbour of it one value's. Counts, never lists. The verdict's arithmetic is `node_counts.lof_counts` on those counts (the same as a
  walk's), the histogram's is `histogram_kernel.bin_interval` with min and max read off the
  cells ranked by minimum and by maximum (the first member cell each way).

A context below DIRECT_SHARE of the grid (`share_gate`, before any dispatch), one a walk
already holds, or one that would read more than BUDGET entries (or reads of T) walks as
before: a small context's walk is cheap, and its members' values near v are sparse among the
table's. So a check costs its entries near v and a few reads, flat in the member cells; the
window is the walk's (`engine.lof_checks.lof_window`), and a read past it answers WALK too.
Births shape, the full context after a neighbour (`python -m benchmarks.per_check_cells`,
CPU µs, load ~8, main's code in the same minutes): LOF 14 against 133, histogram 7 against 73.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from pcor_sql.core.jit import compiled_with, first_position
from pcor_sql.core.verifiers.histogram_kernel import COUNT, FALLBACK, bin_interval
from pcor_sql.core.verifiers.moment_kernel import FALSE, TRUE
from pcor_sql.core.verifiers.node_counts import WALK, lof_counts

#: A check goes direct when the context's grid points are at least this share of the grid.
DIRECT_SHARE = 0.25
#: At most this many entries and reads of T a direct check (~2 ns each); past it: WALK.
BUDGET = 1 << 14
#: The most entries T may hold (int64): 32 MiB; a larger grid keeps the walk.
MAX_TENSOR = 1 << 22


def share_gate(offsets: tuple[int, ...], sizes: tuple[int, ...]) -> Callable[[int], bool]:
    """mask → whether the context's grid share reaches DIRECT_SHARE, in Python (a few popcounts):
    a small context's check walks without the direct kernel's dispatch (~2 µs)."""
    parts = [(off, (1 << size) - 1) for off, size in zip(offsets, sizes)]
    grid = float(math.prod(sizes)) * DIRECT_SHARE

    def large(mask: int) -> bool:
        points = 1
        for off, low in parts:
            points *= ((mask >> off) & low).bit_count()
        return points >= grid

    return large


def grid_meta(coords: np.ndarray, rows: np.ndarray, offsets: tuple[int, ...], sizes: tuple[int, ...]
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """(meta, T) for `context_rows`: meta = [m, D_0.., stride_0.., first bit_0..], T the rows
    tensor extended by each attribute's sum (C order, index D_j = ALL_j); None when T would
    hold more than MAX_TENSOR entries."""
    m = len(sizes)
    if m == 0 or math.prod(d + 1 for d in sizes) > MAX_TENSOR:
        return None
    tensor = np.zeros(tuple(sizes), dtype=np.int64)
    np.add.at(tensor, tuple(np.asarray(coords, dtype=np.int64).T), np.asarray(rows, dtype=np.int64))
    for j in range(m):
        tensor = np.concatenate((tensor, tensor.sum(axis=j, keepdims=True)), axis=j)
    strides = [math.prod(d + 1 for d in sizes[j + 1:]) for j in range(m)]
    meta = np.asarray([m, *sizes, *strides, *offsets], dtype=np.int64)
    return meta, np.ascontiguousarray(tensor.ravel())


def by_value(estart: np.ndarray, ent: np.ndarray, flat: np.ndarray, values: int, m: int, t: int
             ) -> tuple[np.ndarray, ...]:
    """The window's entries (`window_counts.window_entries`, per cell) regrouped for
    `_value_rows`: (vstart (values + 1), bits (entries × width, int32), copies) by value, each
    with its cell's bits; each value's rows in the whole table; and the same entries once per
    attribute g grouped by (cell's bit of g, value): (bstart (t · values + 1), their bits and
    copies, each bit's entries) — the complement's side."""
    cell = np.repeat(np.arange(estart.size - 1, dtype=np.int64), np.diff(estart))
    value = ent[0::2].astype(np.int64)
    copies = ent[1::2].astype(np.int64)
    order = np.argsort(value, kind="stable")
    vstart = np.zeros(values + 1, dtype=np.int64)
    np.cumsum(np.bincount(value, minlength=values), out=vstart[1:])
    bits = np.ascontiguousarray(flat[cell[order]], dtype=np.int32)
    total = np.bincount(value, weights=copies, minlength=values).astype(np.int64)
    if t * values > MAX_TENSOR or m * value.size > MAX_TENSOR:  # no complement side: each bit costs more
        none = np.zeros((0, flat.shape[1]), dtype=np.int32)
        return (vstart, bits, np.ascontiguousarray(copies[order]), total, np.zeros(1, dtype=np.int64), none,
                np.zeros(0, dtype=np.int64), np.full(t, value.size + 1, dtype=np.int64))
    key = np.concatenate([flat[cell, g] * values + value for g in range(m)])
    by_key = np.argsort(key, kind="stable")
    bstart = np.zeros(t * values + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=t * values), out=bstart[1:])
    of = np.tile(cell, m)[by_key]
    per_bit = np.diff(bstart[::values]) if values else np.zeros(t, dtype=np.int64)
    return (vstart, bits, np.ascontiguousarray(copies[order]), total, bstart,
            np.ascontiguousarray(flat[of], dtype=np.int32), np.ascontiguousarray(np.tile(copies, m)[by_key]),
            np.ascontiguousarray(per_bit, dtype=np.int64))


def ranked_cells(rows: np.ndarray, flat: np.ndarray, vmin: np.ndarray, vmax: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bits, minima) of the cells with rows by ascending minimum, and (bits, maxima) by
    descending maximum: a context's min is the minimum of its first member cell there."""
    kept = np.flatnonzero(rows > 0)
    up = kept[np.argsort(vmin[kept], kind="stable")]
    down = kept[np.argsort(-vmax[kept], kind="stable")]
    return (np.ascontiguousarray(flat[up], dtype=np.int32), np.ascontiguousarray(vmin[up], dtype=np.float64),
            np.ascontiguousarray(flat[down], dtype=np.int32), np.ascontiguousarray(vmax[down], dtype=np.float64))


@compiled_with(nogil=True)
def _inside(x, words, t):
    """Per context bit, 1 when the context (x, words: `jit.context_words`) holds it."""
    out = np.empty(t, dtype=np.uint8)
    for b in range(t):
        if words.size == 0:
            out[b] = (x >> b) & 1
        else:
            out[b] = (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)
    return out


@compiled_with(nogil=True)
def context_rows(inside, meta, tensor, share, budget):
    """N of the context (`inside`: `_inside`) by inclusion–exclusion over T (`grid_meta`), or
    −1 when its grid share is below `share` or N would take more than `budget` reads."""
    m = meta[0]
    t = 0
    for j in range(m):
        t += meta[1 + j]
    at = np.empty(t + m, dtype=np.int64)  # per attribute its list of T offsets
    sign = np.empty(t + m, dtype=np.int64)
    first = np.empty(m + 1, dtype=np.int64)
    cost = 1
    points = 1.0
    pos = 0
    for j in range(m):
        size, stride, off = meta[1 + j], meta[1 + m + j], meta[1 + 2 * m + j]
        sel = 0
        for d in range(size):
            sel += inside[off + d]
        points *= sel / size
        first[j] = pos
        if sel <= 1 + size - sel:
            for d in range(size):
                if inside[off + d]:
                    at[pos], sign[pos] = d * stride, 1
                    pos += 1
        else:
            at[pos], sign[pos] = size * stride, 1
            pos += 1
            for d in range(size):
                if not inside[off + d]:
                    at[pos], sign[pos] = d * stride, -1
                    pos += 1
        cost *= pos - first[j]
    first[m] = pos
    if points < share or cost > budget or cost == 0:
        return -1
    digit = np.zeros(m, dtype=np.int64)
    n = 0
    while True:
        key, s = 0, 1
        for j in range(m):
            p = first[j] + digit[j]
            key += at[p]
            s *= sign[p]
        n += s * tensor[key]
        j = m - 1
        while j >= 0:
            digit[j] += 1
            if first[j] + digit[j] < first[j + 1]:
                break
            digit[j] = 0
            j -= 1
        if j < 0:
            return n


@compiled_with(nogil=True)
def _missing(inside, per_bit, meta):
    """(the context's missing bits, ascending, as (bit, attribute) rows; whether counting the
    complement's entries costs less than the context's: `_value_rows`' mode)."""
    m = meta[0]
    out = np.empty((inside.size, 2), dtype=np.int64)
    k = 0
    cost = 0
    for j in range(m):
        off = meta[1 + 2 * m + j]
        for d in range(meta[1 + j]):
            if not inside[off + d]:
                out[k, 0], out[k, 1] = off + d, j
                cost += per_bit[off + d]
                k += 1
    return out[:k], cost


@compiled_with(nogil=True)
def _value_rows(d, inside, vs, missing, complement):
    """The context's rows equal to window value d (vs: `by_value`): the copies of d's entries
    in member cells; or, with `complement`, d's rows in the table less those in cells missing
    one of the context's values, each such cell counted at its first missing attribute."""
    vstart, bits, copies, total, bstart, cbits, ccopies = vs[0], vs[1], vs[2], vs[3], vs[4], vs[5], vs[6]
    if complement:
        values = total.size
        out = total[d]
        for q in range(missing.shape[0]):
            b, i = missing[q, 0], missing[q, 1]
            for e in range(bstart[b * values + d], bstart[b * values + d + 1]):
                ok = np.int64(1)
                for g in range(i):
                    ok &= inside[cbits[e, g]]
                out -= ok * ccopies[e]
        return out
    width = bits.shape[1]
    out = 0
    for e in range(vstart[d], vstart[d + 1]):
        ok = np.int64(1)
        for g in range(width):
            ok &= inside[bits[e, g]]
        out += ok * copies[e]
    return out


@compiled_with(nogil=True)
def _member_first(inside, bits, budget):
    """The first rank whose cell is in the context; −1 past `budget` ranks (or none)."""
    width = bits.shape[1]
    for r in range(min(bits.shape[0], budget)):
        ok = np.int64(1)
        for g in range(width):
            ok &= inside[bits[r, g]]
        if ok:
            return r
    return -1


@compiled_with(nogil=True, error_model="numpy")
def lof_direct(x, words, t, meta, tensor, vs, wu, dv, left_end, right_end, v, k, rule):
    """(LOF(V), N, status) as `lof_window_walk` computes it for the context (x, words), or
    status WALK (the caller walks): counts read outwards from v until the verdict is reached."""
    inside = _inside(x, words, t)
    n = context_rows(inside, meta, tensor, DIRECT_SHARE, BUDGET)
    if n < 0:
        return np.nan, 0, WALK
    vstart = vs[0]
    missing, cost = _missing(inside, vs[7], meta)
    complement = cost < vs[1].shape[0]
    cnt = np.zeros(wu.size, dtype=np.int64)
    cnt[dv] = _value_rows(dv, inside, vs, missing, complement)
    spent = 0
    lo, hi = dv, dv + 1  # the counts known: cnt[lo:hi]
    want = 2 * k + 4  # non-zero values a side first (`lof_counts`' first fill), doubled on each retry
    while True:
        for side in range(2):
            found = 0
            at = dv - 1 if side == 0 else dv + 1  # the values already known count, not read again
            while 0 <= at < wu.size and found < want:
                if at < lo or at >= hi:
                    spent += 1 if complement else vstart[at + 1] - vstart[at]
                    if spent > BUDGET:
                        return np.nan, n, WALK
                    cnt[at] = _value_rows(at, inside, vs, missing, complement)
                    if side == 0:
                        lo = at
                    else:
                        hi = at + 1
                found += cnt[at] != 0
                at += 1 if side else -1
        score, status = lof_counts(cnt[lo:hi], n, dv - lo, left_end and lo == 0, right_end and hi == wu.size,
                                   wu[lo:hi], v, k, rule)
        if status != WALK or (lo == 0 and hi == wu.size):
            return score, n, status
        want *= 2


@compiled_with(nogil=True)
def histogram_direct(x, words, t, meta, tensor, vs, wu, up_bits, up_min, down_bits, down_max, window, v, rel):
    """(code, N) as `histogram_walk` answers for the context (x, words), or (WALK, 0)."""
    inside = _inside(x, words, t)
    n = context_rows(inside, meta, tensor, DIRECT_SHARE, BUDGET)
    if n < 0:
        return WALK, 0
    if n == 0:
        return FALLBACK, n
    r_lo = _member_first(inside, up_bits, BUDGET)
    r_hi = _member_first(inside, down_bits, BUDGET)
    if r_lo < 0 or r_hi < 0:
        return WALK, 0
    code, left, right, closed = bin_interval(n, up_min[r_lo], down_max[r_hi], v)
    if code != COUNT:
        return code, n
    if not (window[0] <= left and right <= window[1]):
        return WALK, 0
    d0 = first_position(wu, 0, wu.size, left, False)
    d1 = first_position(wu, d0, wu.size, right, closed)
    missing, cost = _missing(inside, vs[7], meta)
    complement = cost < vs[1].shape[0]
    if not complement and vs[0][d1] - vs[0][d0] > BUDGET:
        return WALK, 0
    inside_rows = 0
    for d in range(d0, d1):
        inside_rows += _value_rows(d, inside, vs, missing, complement)
    return (TRUE if inside_rows < rel * n else FALSE), n
