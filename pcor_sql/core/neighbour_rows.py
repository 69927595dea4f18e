"""A wide context's neighbours as rows of uint64 words, with their dict keys, built in numpy.

On a space of thousands of values a BFS expansion asks about every neighbour of a node (one
per free value: 5,000 on the 5,000-value attribute). Built one by one, each neighbour is a
5,000-bit Python int (`mask ^ bit`), its key that int's bytes (`ContextSpace.key`: one
`int.to_bytes` each) and its words for the compiled check those bytes again
(`walk_batches.context_matrix`): three conversions of 5,000 bits per neighbour, the most of
a release's time (`python -m benchmarks profile-release wide5000 100000 zscore`). Here the
node is converted once; its row is repeated and each copy has its one bit flipped, and the
keys are slices of the matrix's bytes (the same bytes `key` gives: little-endian, `key`'s
width), so no neighbour is a Python int until a search needs it (DESIGN.md §7: the same
contexts, in the same order, as `ContextSpace.neighbours`).

Only for spaces without ordinal attributes (whose moves depend on the context) and wider
than 60 bits (narrower spaces key contexts by the int itself: `ContextSpace.key`).
"""

from __future__ import annotations

from typing import Any, Container

import numpy as np

from pcor_sql.core.space import ContextSpace


#: The width from which bfs builds a node's neighbours as rows (`pays`). Below it one Python
#: int and its key a neighbour cost less than the numpy steps of a node: the fresh neighbours
#: of one node, 12 µs against 74 µs at 90 bits (births), 49 against 144 at 200, 213 against
#: 358 at 500 (timeit of `neighbour_rows` and the fresh filter against the plain expansion in
#: `searches.bfs`, a 2,000-member frontier, load ~7 on 2 cores). Wider, the rows also spare
#: the check its own conversion of each neighbour to words, and they win.
ROWS_FROM_BITS = 256


def applies(space: ContextSpace) -> bool:
    """Whether `neighbour_rows` stands for `space.neighbours` (no ordinal attribute, keyed by bytes)."""
    return not space.ordinal and space.key(0).__class__ is bytes


def pays(space: ContextSpace) -> bool:
    """Whether bfs's expansions build the neighbours as rows (`fresh_neighbours`): where they
    stand for `space.neighbours` and the space is `ROWS_FROM_BITS` wide or more."""
    return applies(space) and space.t >= ROWS_FROM_BITS


def n_words(space: ContextSpace) -> int:
    """Words of a context row (as the compiled checks read it: bit b in word b // 64)."""
    return (space.t + 63) // 64


def row_keys(rows: np.ndarray, space: ContextSpace) -> list[bytes]:
    """`space.key` of each row's context: the first key-width bytes of each row."""
    width = rows.shape[1] * 8
    kb = len(space.key(0))
    raw = np.ascontiguousarray(rows).tobytes()
    return [raw[i:i + kb] for i in range(0, len(raw), width)]


def neighbour_rows(space: ContextSpace, mask: int) -> tuple[np.ndarray, list[bytes]]:
    """(rows, keys) of `space.neighbours(mask)`, in its order: rows (neighbours × words,
    uint64, little-endian words) and each neighbour's `space.key`."""
    w = n_words(space)
    base = np.frombuffer(mask.to_bytes(8 * w, "little"), dtype="<u8").astype(np.uint64)
    bits = space._free_positions
    rows = np.repeat(base[None, :], bits.size, axis=0)
    rows[np.arange(bits.size), bits >> 6] ^= np.left_shift(np.uint64(1), (bits & 63).astype(np.uint64))
    return rows, row_keys(rows, space)


def path_rows(space: ContextSpace, mask: int, removed: list[int]) -> tuple[np.ndarray, list[bytes]]:
    """(rows, keys) of the path that clears the bits `removed` of `mask` one after the other:
    row j is `mask` without removed[0 … j] (a descent's contexts, `descent_batches`)."""
    w = n_words(space)
    base = np.frombuffer(mask.to_bytes(8 * w, "little"), dtype="<u8").astype(np.uint64)
    bits = np.asarray(removed, dtype=np.int64)
    keep = np.full((bits.size, w), np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    keep[np.arange(bits.size), bits >> 6] = ~np.left_shift(np.uint64(1), (bits & 63).astype(np.uint64))
    rows = base[None, :] & np.bitwise_and.accumulate(keep, axis=0)
    return rows, row_keys(rows, space)


def fresh_neighbours(oracle: Any, node: int, visited: Container[Any], frontier: Container[Any]
                     ) -> tuple[list[tuple[int, bytes]], list[bool]]:
    """bfs's fresh neighbours of `node` — those neither visited nor on the frontier, as
    (context, key) in `space.neighbours` order — and their verdicts, asked in one batch
    (`Evaluator.valid_keyed`, which reads the rows themselves): as the plain expansion finds and
    asks them. Only the fresh ones become Python ints."""
    space = oracle.space
    rows, keys = neighbour_rows(space, node)
    picked = [i for i, k in enumerate(keys) if k not in visited and k not in frontier]
    flips = space.neighbour_flips(node)
    fresh = [(node ^ flips[i], keys[i]) for i in picked]
    if not fresh:
        return fresh, []
    return fresh, oracle.valid_keyed([c for c, _ in fresh], [k for _, k in fresh], rows[picked])
