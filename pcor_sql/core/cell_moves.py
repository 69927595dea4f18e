"""The cells a move between two contexts can take out of the population or bring in (`python -m benchmarks scale
--cases wide500,wide5000` measures the wide spaces it serves).

When a context changes by a few values, only cells holding one of them change membership, and
of those only the ones matching the rest of the context: the slice {value b of attribute i} ×
(the selected values of every other attribute). `moved_cells` lists, per changed value, the
cheaper of that slice (read off `jit.cell_index`'s grid of value combinations: exactly the
cells that change, plus grid points without rows) and the value's whole cell list, then
`moment_state` and `window_counts.move` apply them against their member flags. A removed value's
slice is taken in the old context (its cells are members there: they all leave); an added
value's in the new one (its cells all belong there: those not yet members enter). Cells listed
twice (two changed values) are harmless: a walk enters or leaves a cell by its flag.

A node pass (`node_counts`, `moment_node`) takes the moves of one value from a node P at once:
`cell_lacks` says which of them each cell moves — none of P's values lacked, it is in P and in
the slab of each of its own values; one, in that value's slab only; two or more, in none.
"""

from __future__ import annotations

import numpy as np

from pcor_sql.core.jit import bit_of, compiled, set_bits


@compiled
def _before_and_after(x, words, changed, nch):
    """The contexts before the move (row 0: the one after with the changed bits changed[:nch]
    flipped back) and after it (row 1), as (xs, ws): a removed value's slice is taken in the
    first, an added value's in the second."""
    xs = np.empty(2, dtype=np.int64)
    ws = np.empty((2, words.size), dtype=np.uint64)
    xs[:] = x
    ws[0, :] = words
    ws[1, :] = words
    for q in range(nch):
        b = changed[q]
        if words.size == 0:
            xs[0] ^= np.int64(1) << b
        else:
            ws[0, b >> 6] ^= np.uint64(1) << np.uint64(b & 63)
    return xs, ws


@compiled
def _slice_size(x, words, index, i):
    """How many grid points the slice of one value of attribute i holds in the context (with
    i = −1, the context's own: `grid_size`)."""
    m = index[0]
    size = 1
    for j in range(m):
        if j == i:
            continue
        count = 0
        for b in range(index[2 + j], index[3 + j]):
            count += bit_of(x, words, b)
        size *= count
    return size


@compiled
def _slice(x, words, index, at0, i, b, out, k):
    """Append to out[k:] the cells of attribute i's value b × the context's values elsewhere."""
    sel = np.empty(index[1], dtype=np.int64)
    first = np.empty(index[0] + 1, dtype=np.int64)
    if not grid_offsets(x, words, index, i, b, sel, first):
        return k  # an attribute without a value: an empty slice
    return grid_cells(sel, first, index, at0, out, k)


@compiled
def moved_cells(x, words, dx, dwords, flat, index, out):
    """(leaving, total): cells that may leave the population in out[:leaving] and cells that
    may enter in out[leaving:total], for the move to (x, words) from the context that differs
    in the bits (dx, dwords); (−1, cost) when listing them would cost more than half the cells
    (then the caller counts the new context afresh). `out` holds at least half the cells."""
    cells, width = flat.shape
    m = index[0]
    t = index[1]
    s0 = 2 + m + 1
    c0 = s0 + t + 1
    g0 = c0 + index[s0 + t]  # the grid's size, then its cells
    dense = index[g0] > 0
    # The changed values, ascending (so attribute by attribute), each with its attribute.
    changed = np.empty(t, dtype=np.int64)
    nch = set_bits(dx, dwords, 0, t, changed, 0)
    attr = np.empty(nch, dtype=np.int64)
    i = 0
    for q in range(nch):
        while changed[q] >= index[3 + i]:
            i += 1
        attr[q] = i
    xs, ws = _before_and_after(x, words, changed, nch)
    # What each changed value costs, the cheaper way: its slice or its cell list.
    cost = 0
    for q in range(nch):
        b = changed[q]
        listed = index[s0 + b + 1] - index[s0 + b]
        if dense:
            side = bit_of(x, words, b)  # an added value's slice is in the context after the move
            sliced = _slice_size(xs[side], ws[side], index, attr[q])
            cost += min(sliced, listed)
        else:
            cost += listed
    if 2 * cost > cells:
        return -1, cost
    k = 0
    leaving = 0
    for adding in range(2):  # removed values first: their cells are listed as leaving
        for q in range(nch):
            b = changed[q]
            if bit_of(x, words, b) != adding:
                continue
            i = attr[q]
            listed = index[s0 + b + 1] - index[s0 + b]
            if dense and _slice_size(xs[adding], ws[adding], index, i) < listed:
                k = _slice(xs[adding], ws[adding], index, g0 + 1, i, b, out, k)
                continue
            for j in range(index[s0 + b], index[s0 + b + 1]):
                c = index[c0 + j]
                if adding:
                    inside = np.int64(1)
                    for g in range(width):
                        inside &= bit_of(x, words, flat[c, g])
                    if not inside:
                        continue
                out[k] = c
                k += 1
        if adding == 0:
            leaving = k
    return leaving, k


@compiled
def grid_size(x, words, index):
    """Grid points (value combinations) of the context (x, words): Π over attributes of its
    selected values; −1 when `jit.cell_index` kept no grid (too many combinations)."""
    m = index[0]
    t = index[1]
    s0 = 2 + m + 1
    c0 = s0 + t + 1
    g0 = c0 + index[s0 + t]
    if index[g0] == 0:
        return -1
    return _slice_size(x, words, index, -1)


@compiled
def grid_members(x, words, index, out):
    """The member cells of the context (x, words) into out[:k], read off the grid of value
    combinations (`jit.cell_index`): O(its grid points), whatever the summary's width; k. The
    cells come in grid order (attribute 0 fastest), not ascending. Needs `grid_size` ≥ 0 and
    `out` of at least that size."""
    m = index[0]
    t = index[1]
    s0 = 2 + m + 1
    c0 = s0 + t + 1
    at0 = c0 + index[s0 + t] + 1
    sel, first, some = grid_selection(x, words, index)
    if not some:
        return 0
    return grid_cells(sel, first, index, at0, out, 0)


@compiled
def grid_cells(sel, first, index, at0, out, k):
    """Append to out[k:] the cells at the grid points of the selection (`grid_offsets`), in grid
    order (attribute 0 fastest); the new end. `at0`: where `jit.cell_index`'s grid starts."""
    m = index[0]
    # The outer attributes' offset, digit by digit; attribute 0's values in the innermost loop.
    digit = np.zeros(m, dtype=np.int64)
    lo0, hi0 = first[0], first[1]
    while True:
        base = 0
        for j in range(1, m):
            base += sel[first[j] + digit[j]]
        for p in range(lo0, hi0):
            c = index[at0 + base + sel[p]]
            if c >= 0:
                out[k] = c
                k += 1
        if not next_digit(digit, first, 1, m):
            return k


@compiled
def grid_selection(x, words, index):
    """(sel, first, some): `grid_offsets` of the context (x, words) in new arrays."""
    sel = np.empty(index[1], dtype=np.int64)
    first = np.empty(index[0] + 1, dtype=np.int64)
    some = grid_offsets(x, words, index, -1, 0, sel, first)
    return sel, first, some


@compiled
def grid_offsets(x, words, index, fixed, fixed_bit, sel, first):
    """`select_values`, each value then as its grid offset ((b − lo) × the attribute's stride
    in `jit.cell_index`'s grid, attribute 0 fastest): what the grid's readers add up."""
    if not select_values(x, words, index, fixed, fixed_bit, sel, first):
        return False
    stride = 1
    for j in range(index[0]):
        lo, hi = index[2 + j], index[3 + j]
        for p in range(first[j], first[j + 1]):
            sel[p] = (sel[p] - lo) * stride
        stride *= hi - lo
    return True


@compiled
def select_values(x, words, index, fixed, fixed_bit, sel, first):
    """Per attribute j, the context's values (their bits, ascending) in sel[first[j]:first[j + 1]]
    — attribute `fixed`, when ≥ 0, at fixed_bit alone (a slice); False when an attribute has
    none (an empty context or slice; `first` is then partly written). `sel`: room for
    `jit.cell_index`'s t values, `first` for m + 1."""
    m = index[0]
    pos = 0
    for j in range(m):
        first[j] = pos
        if j == fixed:
            sel[pos] = fixed_bit
            pos += 1
            continue
        for b in range(index[2 + j], index[3 + j]):
            if bit_of(x, words, b):
                sel[pos] = b
                pos += 1
        if pos == first[j]:
            return False
    first[m] = pos
    return True


@compiled
def next_digit(digit, first, start, m):
    """The next combination of an odometer over the attributes' selections (digit[j] indexes
    sel[first[j]:first[j + 1]]; attribute `start` turns fastest, those below stay); False once
    it has gone round."""
    for j in range(start, m):
        digit[j] += 1
        if first[j] + digit[j] < first[j + 1]:
            return True
        digit[j] = 0
    return False


@compiled
def lacked_bits(words, t):
    """missing[b] = 1 where the node (words: uint64 context words) lacks bit b < t, else 0: what
    `cell_lacks` reads, a load per value instead of a shift."""
    missing = np.empty(t, dtype=np.int64)
    for b in range(t):
        missing[b] = 1 - bit_of(0, words, b)
    return missing


@compiled
def cell_lacks(missing, flat, c, m):
    """(lacked, which): how many of cell c's m values (`flat`: `jit.flat_bits`) the node lacks
    (`lacked_bits`), and the last attribute whose value it lacks (0 when none)."""
    lacked = 0
    which = 0
    for g in range(m):
        lack = missing[flat[c, g]]
        lacked += lack
        which = g if lack else which
    return lacked, which
