"""numba compilation for the validity checks, and the two steps every compiled check shares.

`compiled(fn)` is `numba.njit(cache=True, nogil=True)`: every kernel is nopython code over
numpy buffers, so it releases the GIL (threads of the service's pool run checks side by side
while another thread runs Python). Machine code is written beside the source
(`__pycache__/*.nbi, *.nbc`) or, when the package directory is read-only, under the user's
cache directory (numba's `UserWideCacheLocator`: `$NUMBA_CACHE_DIR` if set, else
`~/.cache/numba`), so only the first run on a machine pays the compilation. When no cache
directory is writable at all, numba refuses `cache=True` at decoration; the functions are then
compiled in memory each run (slower start, same results) rather than failing the import.

`member_cells` is the context → member-cells step (`CellSummary.member`) as a loop: a context
is a bitset over the declared domains (`core.space`), passed as little-endian 64-bit words,
and `flat[c, i]` is the bit of cell c's value of attribute i (attribute offset + domain index).

`numpy_sum` is numpy's pairwise summation of a contiguous float64 array (`np.add.reduce`,
numpy/_core/src/umath/loops_utils.h.src `pairwise_sum`): blocks of up to 128 summed in 8
lanes, halves (rounded to a multiple of 8) summed recursively. The checks combine moments
with it so that their floats are numpy's bit for bit, hence the same verdicts as the numpy
reference even at a threshold (tests compare them with numpy on many lengths).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

from pcor_sql.core import compile_notice, kernel_cache
from pcor_sql.errors import UserError

try:
    import numba
    import numba.core.event
except ImportError as exc:  # installed but broken (e.g. llvmlite's library missing): one line, not a traceback
    raise UserError(
        f"numba, which compiles pcor-sql's validity checks, cannot be imported ({exc})",
        "reinstall it: pip install --force-reinstall 'numba>=0.60'",
    ) from None



class _CompileEvents(numba.core.event.Listener):
    """numba's compile events, forwarded to `core.compile_notice` (cache loads fire none)."""

    def on_start(self, event: Any) -> None:
        compile_notice.started()

    def on_end(self, event: Any) -> None:
        compile_notice.ended()


numba.core.event.register("numba:compile", _CompileEvents())

# Before any kernel loads from numba's cache: drop it if any kernel module changed (kernel_cache).
kernel_cache.drop_stale_kernels(os.path.dirname(os.path.abspath(__file__)))

_BLOCK = 128  # numpy's PW_BLOCKSIZE


def compiled(fn: Callable[..., Any]) -> Any:
    """`numba.njit(cache=True, nogil=True)`, or without the on-disk cache when no cache directory
    is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available" (read-only everywhere)
        return numba.njit(nogil=True)(fn)


def compiled_with(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """`compiled` with further `numba.njit` options (LOF's kernel: nogil, error_model, inline)."""
    def wrap(fn: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # no writable cache directory: compiled in memory each run
            return numba.njit(**options)(fn)

    return wrap


@compiled_with(nogil=True)
def first_position(values, lo, hi, x, right):
    """The first position in values[lo:hi] (ascending) holding a value ≥ x — numpy's searchsorted
    left — or, with `right`, a value > x (searchsorted right). Every kernel's binary search."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x or (right and values[mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


NO_WORDS = np.empty(0, dtype=np.uint64)


def context_words(mask: int, n_words: int) -> tuple[int, np.ndarray]:
    """(x, words) for `member_cells`: a context below 2^63 of a space of at most 64 bits travels
    as one int64 (x), any other as little-endian uint64 words (bit b → word b // 64). In a wider
    space x would not do even for a small mask: a cell's bit b ≥ 64 would be read as x >> b,
    which the machine takes as x >> (b mod 64)."""
    if n_words == 1 and mask < 1 << 63:
        return mask, NO_WORDS
    return 0, np.frombuffer(mask.to_bytes(8 * n_words, "little"), dtype=np.uint64)


def flat_bits(coords: np.ndarray, offsets: Any, always: int) -> np.ndarray:
    """`coords[c, i] + offsets[i]`: the context bit that selects cell c's value of attribute i,
    padded to a multiple of 4 columns with a bit every checked context has (`always`, one of
    the record's own values), so that the membership test runs four attributes at a time."""
    cells, m = coords.shape
    flat = np.empty((cells, m + (-m % 4)), dtype=np.int64)
    np.add(coords, np.asarray(offsets, dtype=np.int64)[None, :], out=flat[:, :m])
    flat[:, m:] = always
    return flat


@compiled
def member_cells(x: int, words: np.ndarray, flat: np.ndarray, out: np.ndarray) -> int:
    """Writes the indices of the cells inside the context into `out` (ascending); returns how
    many. The context is `x` when `words` is empty, else `words` (`context_words`)."""
    k = 0
    cells, width = flat.shape
    # Branch-free, four attributes at a time: whether a random context holds a cell is a coin
    # flip, which a branch mispredicts half the time (4.6 µs at 1,200 cells against 1.8 µs).
    if words.size == 0 and width == 4:  # up to 4 attributes: the loop over them unrolled (3× faster)
        for c in range(cells):
            inside = (x >> flat[c, 0]) & (x >> flat[c, 1]) & (x >> flat[c, 2]) & (x >> flat[c, 3])
            out[k] = c
            k += inside & 1
        return k
    if words.size == 0:
        for c in range(cells):
            inside = np.int64(1)
            for g in range(0, width, 4):
                inside &= (x >> flat[c, g]) & (x >> flat[c, g + 1]) & (x >> flat[c, g + 2]) & (x >> flat[c, g + 3])
            out[k] = c
            k += inside & 1
        return k
    one = np.uint64(1)
    for c in range(cells):
        inside = one
        for g in range(width):
            b = flat[c, g]
            inside &= words[b >> 6] >> np.uint64(b & 63)
        out[k] = c
        k += np.int64(inside & one)
    return k


#: The indexed membership walks the cells of the attribute whose chosen values hold the fewest,
#: when those are at most this share of all cells; else it scans every cell (branch-free, ~1.5 ns
#: a cell, which a walk of random rows and a sort of its result do not beat on a larger share).
SPARSE_SHARE = 4

#: Summaries of at least this many cells carry the last context checked along the moves
#: (`moment_walk`; `window_counts` for LOF and the histogram); smaller ones keep the one-pass
#: kernels, whose whole check costs a few µs (3-10 µs at 1,200 cells), which a random jump — a
#: walk's worst case — does not slow down.
WALK_CELLS = 4096

#: The most grid points (combinations of declared values) `cell_index` maps to cells: 16 MiB.
DENSE_CELLS = 1 << 21

NO_INDEX = np.zeros(2, dtype=np.int64)  # m = 0: `member_cells_indexed` scans every cell


def cell_index(coords: np.ndarray, offsets: Any, t: int) -> np.ndarray:
    """Per context bit (attribute i's value d is bit offsets[i] + d), the cells holding that
    value, ascending, for `member_cells_indexed`: one int64 array [m, t, the m + 1 attributes'
    first bits, the t + 1 starts, then cells · m cell indices grouped by bit], then the size P
    of the grid of all value combinations and, when P ≤ DENSE_CELLS, the cell at each grid point
    (−1 where no row is; attribute 0 varies fastest), which `core.cell_moves` enumerates slices
    of. Memory: 8 bytes per cell and attribute, per declared value, and per grid point (≤ 16 MiB)."""
    cells, m = coords.shape
    if cells == 0 or m == 0:
        return NO_INDEX
    offsets = np.asarray(offsets, dtype=np.int64)
    bounds = np.concatenate((offsets, [t]))
    sizes = np.diff(bounds)
    # Per attribute, the cells grouped by value, ascending within a value: a stable sort of
    # its value codes, which numpy sorts by radix when they fit 16 bits (a domain ≤ 10,000
    # values: `schema`), O(cells) — one sort of all (cell, attribute) bits took 150 ms of a
    # flights-shaped release's 215,000 cells.
    counts, ids = [], []
    for i in range(m):
        codes = coords[:, i].astype(np.int16 if sizes[i] <= 1 << 15 else np.int64)
        counts.append(np.bincount(codes, minlength=int(sizes[i])))
        ids.append(np.argsort(codes, kind="stable"))
    starts = np.concatenate(([0], np.cumsum(np.concatenate(counts))))
    ids = np.concatenate(ids).astype(np.int64)
    grid = math.prod(int(x) for x in sizes)
    if grid <= DENSE_CELLS:
        strides = np.concatenate(([1], np.cumprod(sizes[:-1]))).astype(np.int64)
        at = np.full(grid, -1, dtype=np.int64)
        at[coords.astype(np.int64) @ strides] = np.arange(cells, dtype=np.int64)
    else:
        at = np.empty(0, dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(([m, t], bounds, starts, ids, [at.size], at)), dtype=np.int64)


@compiled
def bit_of(x, words, b):
    """Bit b of the context (x, words) (`context_words`), as 0 or 1."""
    if words.size == 0:
        return (x >> b) & 1
    return np.int64((words[b >> 6] >> np.uint64(b & 63)) & np.uint64(1))


@compiled
def set_bits(x, words, lo, hi, out, k):
    """Append to out[k:] the set bits b of the context (x, words) with lo ≤ b < hi, ascending;
    the new end. Zero words are skipped whole, so a sparse difference between two contexts
    costs its words, not its bits (a bit at a time was a check's main cost on 5,000 values)."""
    if words.size == 0:
        for b in range(lo, min(hi, 64)):
            if (x >> b) & 1:
                out[k] = b
                k += 1
        return k
    one = np.uint64(1)
    for wi in range(lo >> 6, min((hi + 63) >> 6, words.size)):
        w = words[wi]
        if w == 0:
            continue
        base = wi << 6
        for s in range(64):
            if (w >> np.uint64(s)) & one:
                b = base + s
                if lo <= b < hi:
                    out[k] = b
                    k += 1
    return k


@compiled
def index_offsets(index):
    """Where `cell_index`'s parts start: (attribute offsets, value offsets, cell lists)."""
    a0 = 2
    s0 = a0 + index[0] + 1
    return a0, s0, s0 + index[1] + 1


@compiled
def sparsest_attribute(x, words, index, none):
    """(cells, attribute) of the attribute whose values chosen in the context (x, words) hold the
    fewest cells (`none` cells, attribute 0 when there is no attribute)."""
    a0, s0, _ = index_offsets(index)
    best = none
    best_i = 0
    for i in range(index[0]):
        total = 0
        for b in range(index[a0 + i], index[a0 + i + 1]):
            if bit_of(x, words, b):
                total += index[s0 + b + 1] - index[s0 + b]
        if total < best:
            best = total
            best_i = i
    return best, best_i


@compiled
def member_cells_indexed(x, words, flat, index, out):
    """`member_cells` with `cell_index`: the cost follows the context, not the width. The
    attribute whose chosen values hold the fewest cells is found from the index (O(declared
    values)); when those cells are a small share of all, only they are tested and the members
    sorted (O(candidates · log)), else every cell is scanned. The same cells, ascending, either
    way, so every sum over them is the same."""
    cells = flat.shape[0]
    m = index[0]
    if m == 0:
        return member_cells(x, words, flat, out)
    a0, s0, c0 = index_offsets(index)
    best, best_i = sparsest_attribute(x, words, index, cells + 1)
    if best * SPARSE_SHARE > cells:
        return member_cells(x, words, flat, out)
    width = flat.shape[1]
    k = 0
    for b in range(index[a0 + best_i], index[a0 + best_i + 1]):
        if not bit_of(x, words, b):
            continue
        for j in range(index[s0 + b], index[s0 + b + 1]):
            c = index[c0 + j]
            inside = np.int64(1)
            for g in range(width):
                inside &= bit_of(x, words, flat[c, g])
            out[k] = c
            k += inside
    if k > 1:
        out[:k].sort()
    return k


@compiled
def listed_members(x, words, index, member, out):
    """The cells flagged in `member` (the context (x, words)'s, kept by a walk) into `out`,
    ascending; their count. Read off the cells of the attribute whose chosen values hold the
    fewest (`cell_index`), a flag each, rather than off every cell."""
    m = index[0]
    a0, s0, c0 = index_offsets(index)
    best, best_i = sparsest_attribute(x, words, index, member.size + 1)
    k = 0
    if m == 0 or best * SPARSE_SHARE > member.size:
        for c in range(member.size):
            out[k] = c
            k += np.int64(member[c])
        return k
    for b in range(index[a0 + best_i], index[a0 + best_i + 1]):
        if bit_of(x, words, b):
            for j in range(index[s0 + b], index[s0 + b + 1]):
                c = index[c0 + j]
                out[k] = c
                k += np.int64(member[c])
    if k > 1:
        out[:k].sort()
    return k


@compiled
def _block(a: np.ndarray, lo: int, n: int) -> float:
    """numpy's sum of a[lo:lo + n] for n ≤ 128: 8 lanes, then the remainder in order."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@compiled
def _pairwise(a: np.ndarray, n: int) -> float:
    """numpy's recursion (halves rounded down to a multiple of 8, left + right), run on an
    explicit stack: numba cannot cache a recursive function."""
    if n <= _BLOCK:
        return _block(a, 0, n)
    start = np.empty(64, dtype=np.int64)  # the halves shrink n by 2 each level: depth < 64
    size = np.empty(64, dtype=np.int64)
    stage = np.empty(64, dtype=np.int64)
    done = np.empty(64, dtype=np.float64)
    top, k = 0, 0
    start[0], size[0], stage[0] = 0, n, 0
    while top >= 0:
        lo, m = start[top], size[top]
        if m <= _BLOCK:
            done[k] = _block(a, lo, m)
            k += 1
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        if stage[top] == 0:  # the left half first
            stage[top] = 1
            top += 1
            start[top], size[top], stage[top] = lo, half, 0
        elif stage[top] == 1:  # then the right half
            stage[top] = 2
            top += 1
            start[top], size[top], stage[top] = lo + half, m - half, 0
        else:  # both halves summed: left + right
            done[k - 2] = done[k - 2] + done[k - 1]
            k -= 1
            top -= 1
    return done[0]


@compiled
def numpy_sum(a: np.ndarray, n: int) -> float:
    """`a[:n].sum()` as numpy computes it (pairwise; the reduction starts from 0.0)."""
    return 0.0 + _pairwise(a, n)
