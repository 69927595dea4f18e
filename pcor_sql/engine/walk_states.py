"""A window walk's carried states (`window_counts.new_walk`): which one each check moves, and
the full context's snapshot to restore from (`engine.lof_checks`, `engine.compiled_checks`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pcor_sql.core.jit import NO_WORDS, context_words
from pcor_sql.core.verifiers.walk_batches import context_matrix, words_of
from pcor_sql.core.verifiers.window_counts import move, new_walk

_NEAR_VALUES = 4  # values apart: the moves between two contexts stay cheap (a few slabs)


class WalkStates:
    """A window walk's states (`window_counts.new_walk`), WALKS of them, and a snapshot of the
    full context's: each check moves the state whose last context differs from it in the fewest
    values, or — when the full context is nearer — the least recently used one, restored from
    the snapshot (a copy of the flags and counts, ~10 µs). A search that alternates between
    regions of the lattice (the start's lockstep of a sweep up from V's cell and a breadth-first
    sweep down from the full context, whose consecutive contexts lie a few values apart) would
    otherwise recount afresh, O(cells), at most of its checks."""

    WALKS = 2

    def __init__(self, cells: int, window: int, dv: int, left_end: bool, right_end: bool, ranks: bool, n_words: int,
                 full: int, moves: tuple[Any, ...]):
        self.walks = [new_walk(cells, window, dv, left_end, right_end, ranks)[:4] for _ in range(self.WALKS)]
        self.scratch = np.empty(2 * cells + 2, dtype=np.int64)  # shared: a check uses it only while it runs
        self.last: list[int | None] = [None] * self.WALKS
        self.previous: int | None = None  # what `step` found in the state it chose (`current`)
        self.current = 0
        self.used = list(range(self.WALKS))  # least recently used first
        self.n_words, self.full, self.moves = n_words, full, moves  # moves: (flat, index, rows_of, ent)
        self.snapshot: tuple[np.ndarray, ...] | None = None
        self._fresh = new_walk(cells, window, dv, left_end, right_end, ranks)[:4]

    def step(self, mask: int) -> tuple[Any, ...]:
        """(x, words, dx, dwords, state, member, cnt, bits) of the context `mask` and its
        difference from the chosen state's last context."""
        best, far = 0, -1
        for i, last in enumerate(self.last):
            if last is None:  # unused: taken when the nearest used one is more than a few values away
                if far < 0 or far > _NEAR_VALUES:
                    best, far = i, _NEAR_VALUES
                break
            far_i = (mask ^ last).bit_count()
            if far < 0 or far_i < far:
                best, far = i, far_i
        if far > _NEAR_VALUES and (self.full ^ mask).bit_count() < far:
            best = self.used[0]
            self._restore(best)
        self.used.remove(best)
        self.used.append(best)
        last, self.last[best] = self.last[best], mask
        self.previous, self.current = last, best
        x, words = context_words(mask, self.n_words)
        dx, dwords = context_words(mask ^ last, self.n_words) if last is not None else (0, NO_WORDS)
        return (x, words, dx, dwords, *self.walks[best])

    def batch(self, masks: list[int], rows: Any = None) -> tuple[Any, ...]:
        """(contexts, the chosen state's last context's words, (state, member, cnt, bits), codes,
        ns) for a `walk_batches` driver over `masks`: the state `step` chooses for the first,
        left at the last. `rows`, when given, are the masks' words (`core.neighbour_rows`)."""
        state = self.step(masks[0])[4:]
        self.last[self.current] = masks[-1]
        ctx = context_matrix(masks, self.n_words) if rows is None else rows
        return (ctx, words_of(self.previous, self.n_words), state,
                np.empty(len(masks), dtype=np.int64), np.empty(len(masks), dtype=np.int64))

    def _restore(self, i: int) -> None:
        if self.snapshot is None:
            x, words = context_words(self.full, self.n_words)
            move(x, words, 0, NO_WORDS, *self.moves, *self._fresh, self.scratch)
            self.snapshot = self._fresh
        for kept, into in zip(self.snapshot, self.walks[i]):
            into[:] = kept
        self.last[i] = self.full
