"""A search node's neighbours checked from the node itself: one pass over the cells, then each
neighbour's rows per window value without moving a walk.

A BFS asks a node P's neighbours in one batch: each is P with one value b (of attribute i) added
or removed, so its population is P's plus or minus the slab {b} × P's values of every other
attribute. A walk (`window_counts.move`) checks them one after the other, each move undoing the
last neighbour's slab and taking the next one: two slabs a check — on the births shape about
7,600 cells and 250 µs after the full context. Here one pass over the cells sorts each into the
slabs it belongs to: a cell missing none of P's values is in P and in the slab of each of its own
values; a cell missing exactly one (attribute i's value b) is in the slab of b only (the slab of a
value P lacks); a cell missing two is in no neighbour. The pass adds each cell's rows and window
entries (`window_counts.window_entries`) to the slabs asked for (`slab_counts`), O(cells · m +
entries); then a neighbour's counts are P's ± its slab's, O(window values), and LOF reads them
outwards from v exactly as `lof_window_walk` does (`lof_counts`).

Exact: every neighbour's N and rows per window value are those a walk would carry (sums of the
same integers). A neighbour whose LOF reads past the window on a side that does not reach the
table's end needs the member runs beyond it (the walk's heap, or its widening): `lof_counts`
answers WALK and the caller checks that one through the walk, which computes the same score.

Privacy: verdicts only decide validity, which OCDP treats as public structure; no cost here.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.cell_moves import cell_lacks, lacked_bits
from pcor_sql.core.jit import compiled_with
from pcor_sql.core.verifiers.lof_kernel import DISTINCT_RULE, _OK, _grown, _lof_buffered
from pcor_sql.core.verifiers.lof_walk import DONE, MODE, N_SIDE
from pcor_sql.core.verifiers.lof_window_walk import _done_view, _fill_window, settled, window_start
from pcor_sql.core.verifiers.window_counts import R_E0, R_ROWS

#: status: the neighbour's LOF reads past the window where the table goes on — ask the walk.
WALK = 6


@compiled_with(nogil=True)
def _has(words, b):
    return (words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)


@compiled_with(nogil=True)
def slab_counts(words, flips, flat, m, t, rows_of, ent, values, vmin, vmax, extremes):
    """(N, marg_n, marg_cnt, cnt_p, lo_of, hi_of) of the node (words: its uint64 context words):
    cnt_p its rows per window value (`values` of them), and for each neighbour q (the node with
    bit flips[q] toggled) marg_n[q], marg_cnt[q] the rows and rows per window value of flips[q]'s
    slab: the cells of that value whose other attributes' values are all the node's. flat:
    `jit.flat_bits` (its first m columns: each cell's bit per attribute). With `extremes`, in the
    same pass lo_of[b], hi_of[b]: the least minimum and greatest maximum (vmin, vmax: per cell)
    over every bit b's slab — the node's cells holding b when the node has b, else the cells
    missing b only (±inf when empty) — the histogram's (else both empty)."""
    cells = flat.shape[0]
    q_n = flips.size
    row_of_bit = np.full(t, -1, dtype=np.int64)
    for q in range(q_n):
        row_of_bit[flips[q]] = q
    marg_n = np.zeros(q_n, dtype=np.int64)
    marg_cnt = np.zeros((q_n, values), dtype=np.int64)
    cnt_p = np.zeros(values, dtype=np.int64)
    lo_of = np.full(t if extremes else 0, np.inf)
    hi_of = np.full(t if extremes else 0, -np.inf)
    missing = lacked_bits(words, t)
    n_p = 0
    for c in range(cells):
        miss, which = cell_lacks(missing, flat, c, m)
        rows = rows_of[c, R_ROWS]
        if miss > 1 or rows == 0:  # an empty cell adds nothing, nor bounds the extremes
            continue
        e0, e1 = rows_of[c, R_E0], rows_of[c + 1, R_E0]
        if miss == 0:
            n_p += rows
            for e in range(e0, e1):
                cnt_p[ent[2 * e]] += ent[2 * e + 1]
            lo, hi = 0, m
        else:
            lo, hi = which, which + 1
        for g in range(lo, hi):
            b = flat[c, g]
            if extremes:
                lo_of[b] = min(lo_of[b], vmin[c])
                hi_of[b] = max(hi_of[b], vmax[c])
            r = row_of_bit[b]
            if r < 0:
                continue
            marg_n[r] += rows
            for e in range(e0, e1):
                marg_cnt[r, ent[2 * e]] += ent[2 * e + 1]
    return n_p, marg_n, marg_cnt, cnt_p, lo_of, hi_of


@compiled_with(nogil=True, error_model="numpy")
def lof_counts(cnt, n, dv, left_end, right_end, wu, v, k, rule):
    """(LOF(V), status) of a context from its rows per window value `cnt` and N, as
    `lof_window_walk` computes it after its move; status WALK where that walk would go past the
    window through its heap (or widen it)."""
    cv = cnt[dv]
    score, kk = settled(n, cv, k, rule)
    if kk < 0:
        return score, _OK
    st, bv, bc, kd, center, want_l = window_start(dv, left_end, right_end, v, cv, k)
    want_r = want_l
    while True:
        for side in range(2):
            if st[DONE + side] == 1:
                continue
            _fill_window(side, want_r if side else want_l, st, bv, bc, center, cnt, wu)
            if st[MODE + side] == 1:
                return np.nan, WALK
        if rule == DISTINCT_RULE and kk == k:
            nl, nr = st[N_SIDE], st[N_SIDE + 1]
            if nl + nr < k and st[DONE] == 1 and st[DONE + 1] == 1:
                kk = nl + nr
                if kk == 0:
                    return np.nan, _OK
        score, status = _lof_buffered(v, float(cv), kk, rule, kd, bv, bc, center, _done_view(st))
        if status == _OK:
            return score, _OK
        want_l, want_r, bv, bc, kd, center = _grown(status, want_l, want_r, st, bv, bc, kd, center)


@compiled_with(nogil=True, error_model="numpy")
def lof_node_many(words, flips, flat, m, t, rows_of, ent, wu, dv, left_end, right_end, v, k, rule, scores, codes, ns):
    """LOF of each neighbour q of the node (words): the node with bit flips[q] toggled (distinct
    bits); scores[q], codes[q] (`lof_counts`' status), ns[q] (its N)."""
    none = np.empty(0)
    n_p, marg_n, marg_cnt, cnt_p, _, _ = slab_counts(words, flips, flat, m, t, rows_of, ent, wu.size, none, none,
                                                     False)
    rows = np.arange(flips.size)
    _neighbours_lof(words, flips, rows, n_p, cnt_p, marg_n, marg_cnt, wu, dv, left_end, right_end, v, k, rule,
                    scores, codes, ns)


@compiled_with(nogil=True, error_model="numpy")
def lof_from_slabs(words, flips, n_p, cnt_p, slab_n, slab_cnt, wu, dv, left_end, right_end, v, k, rule, scores,
                   codes, ns):
    """`lof_node_many` from a `NodeSlabs` at the node (words): every bit's slab already summed."""
    _neighbours_lof(words, flips, flips, n_p, cnt_p, slab_n, slab_cnt, wu, dv, left_end, right_end, v, k, rule,
                    scores, codes, ns)


@compiled_with(nogil=True, error_model="numpy")
def _neighbours_lof(words, flips, rows, n_p, cnt_p, marg_n, marg_cnt, wu, dv, left_end, right_end, v, k, rule,
                    scores, codes, ns):
    """Each neighbour q's counts, the node's ± the slab in row rows[q] of (marg_n, marg_cnt), and its LOF."""
    cnt = np.empty(wu.size, dtype=np.int64)
    for q in range(flips.size):
        sign = -1 if _has(words, flips[q]) else 1
        r = rows[q]
        for d in range(wu.size):
            cnt[d] = cnt_p[d] + sign * marg_cnt[r, d]
        n = n_p + sign * marg_n[r]
        ns[q] = n
        scores[q], codes[q] = lof_counts(cnt, n, dv, left_end, right_end, wu, v, k, rule)


@compiled_with(nogil=True)
def toggle_slab(b, words, missing, flat, m, index, rows_of, ent, slab_n, slab_cnt, cnt_p, n_p):
    """Moves a `NodeSlabs` from its node P to P with bit b toggled; returns the new node's N.

    Every bit's slab S(b') — the cells holding b' (of attribute i) whose other attributes'
    values are all P's — depends on P's values of the attributes other than i only, so toggling
    b (attribute a) leaves attribute a's slabs alone, and the node's counts move by S(b). Of
    another attribute's slab S(b') only cells holding b can enter or leave: a cell of b lacking
    none of P's values outside attribute a is in the slab of each of its own values there, one
    lacking exactly one (attribute j's) in that value's slab only, one lacking two in none — as
    `slab_counts` sorts them, over b's cells (`jit.cell_index`) instead of all of them."""
    a = 0
    while index[3 + a] <= b:  # the attributes' first bits: index[2 : 3 + m]
        a += 1
    sign = 1 if missing[b] == 1 else -1
    n_p += sign * slab_n[b]
    for d in range(cnt_p.size):
        cnt_p[d] += sign * slab_cnt[b, d]
    s0 = 3 + m
    s1 = s0 + index[1] + 1
    for p in range(index[s0 + b], index[s0 + b + 1]):
        c = index[s1 + p]
        rows = rows_of[c, R_ROWS]
        if rows == 0:
            continue
        lacked = 0
        which = 0
        for g in range(m):
            lack = 0 if g == a else missing[flat[c, g]]
            lacked += lack
            which = g if lack else which
        if lacked > 1:
            continue
        e0, e1 = rows_of[c, R_E0], rows_of[c + 1, R_E0]
        lo, hi = (0, m) if lacked == 0 else (which, which + 1)
        for g in range(lo, hi):
            if g == a:
                continue
            bb = flat[c, g]
            slab_n[bb] += sign * rows
            for e in range(e0, e1):
                slab_cnt[bb, ent[2 * e]] += sign * ent[2 * e + 1]
    missing[b] = 1 - missing[b]
    words[b >> 6] ^= np.uint64(1) << np.uint64(b & 63)
    return n_p


class NodeSlabs:
    """The last BFS node's counts and every bit's slab (`slab_counts` over all t bits), carried
    from node to node: a BFS expands the best frontier member next, most often a neighbour of a
    node just expanded (on the births shape each node is the full context less one value, two
    bits from the last), so moving the slabs by the few bits that differ (`toggle_slab`: those
    values' cells, 1/7 to 1/51 of them on births) replaces the pass over every cell. A move that
    would read more cells than one pass is a fresh pass. Exact: the same integer sums as
    `slab_counts` at the node. Memory: t × window values counts (`fits`)."""

    def __init__(self, flat: np.ndarray, m: int, t: int, index: np.ndarray, rows_of: np.ndarray, ent: np.ndarray,
                 values: int):
        self.flat, self.m, self.t, self.index, self.rows_of, self.ent, self.values = flat, m, t, index, rows_of, ent, values
        first = 3 + m  # the t + 1 starts of each bit's cells in `index`
        self.cells_of = np.diff(index[first:first + t + 1]).tolist()
        self.cells = flat.shape[0]
        self.mask: int | None = None
        self.words = np.empty(0, dtype=np.uint64)
        self.missing = np.empty(0, dtype=np.int64)
        self.n_p = 0
        self.cnt_p = self.slab_n = self.slab_cnt = np.empty(0, dtype=np.int64)

    def at(self, mask: int, words: np.ndarray) -> NodeSlabs:
        """Moved to the node `mask` (its uint64 `words`); itself."""
        if self.mask == mask:
            return self
        diff = mask ^ self.mask if self.mask is not None else -1
        bits = _bits(diff) if 0 <= diff and diff.bit_count() <= 64 else None
        if bits is None or sum(self.cells_of[b] for b in bits) >= self.cells:
            none = np.empty(0)
            self.n_p, self.slab_n, self.slab_cnt, self.cnt_p, _, _ = slab_counts(
                words, np.arange(self.t, dtype=np.int64), self.flat, self.m, self.t, self.rows_of, self.ent,
                self.values, none, none, False)
            self.words, self.missing = words.copy(), lacked_bits(words, self.t)
        else:
            for b in bits:
                self.n_p = toggle_slab(b, self.words, self.missing, self.flat, self.m, self.index, self.rows_of,
                                       self.ent, self.slab_n, self.slab_cnt, self.cnt_p, self.n_p)
        self.mask = mask
        return self


def fits(t: int, values: int, cap: int) -> bool:
    """Whether a `NodeSlabs` (t slabs of `values` window counts) stays within `cap` counts."""
    return t * values <= cap


def _bits(diff: int) -> list[int]:
    out = []
    while diff:
        low = diff & -diff
        out.append(low.bit_length() - 1)
        diff ^= low
    return out
