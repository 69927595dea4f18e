"""One random descent (`exploration.descend`) with its path checked in batches.

A descent's path does not depend on the data: from the full context it removes the selected
free value at a uniformly random position of the list of those left (one coin per step), and
stops at the first valid context. So the next `count` contexts of the path are fixed by the
next `count` coins alone, and can be asked in one compiled call (`Oracle.valid_many`) instead
of one `is_valid` a step — on a 5,000-value attribute a descent is ~5,000 steps, one check
each, the most of a BFS release's time before this (`python -m benchmarks scale --cases
wide5000`).

Same coins, same result: the coins are drawn `count` at a time (a seeded Generator's
`integers(0, highs)` over an array of highs is its draws one by one: the same bounded draws in
the same order); when the first valid context comes before the end of a batch, the generator's
state is restored and only the coins used are drawn again, so the coins after the descent are
the ones the step-by-step loop leaves. The secure source has no state and its unused coins are
simply not used. A batch may check a few contexts past the first valid one, which the loop
would not have asked: validity only, free under OCDP (DESIGN.md §7), each counted as work
(`core.work`) and cached by the oracle as any other answer; the descent's result and every
later coin are the loop's.

Privacy: reads validity and coins only, like `descend`; its result has the same law (the same
value for the same coins), a function of COE(D, V): free.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pcor_sql.core.neighbour_rows import path_rows
from pcor_sql.core.randomness import SecureRandom, Source
from pcor_sql.core.space import ContextSpace

#: The contexts of a descent's first batch, and the most of one (doubling in between): the
#: batch past the first valid context checks at most this many contexts the loop would not ask.
FIRST_BATCH, MOST_BATCH = 32, 1024


def batchable(space: ContextSpace, oracle: Any, source: Source) -> bool:
    """Whether `descend_in_batches` may stand in for `descend`: the oracle checks many contexts
    at once, the space has no ordinal attribute (whose removable bins depend on the context:
    one step at a time), and the source can give back its unused coins (a seeded Generator,
    whose state is restored) or has none to give back (the secure source)."""
    if space.ordinal or getattr(oracle, "valid_many", None) is None:
        return False
    return isinstance(source, SecureRandom) or getattr(getattr(source, "bit_generator", None), "state", None) is not None


def _draws(source: Source, highs: np.ndarray) -> list[int]:
    """One `integers(0, h)` per h of `highs`, in order (the secure source: one call each)."""
    if isinstance(source, SecureRandom):
        return [source.integers(0, int(h)) for h in highs.tolist()]
    return source.integers(0, highs).tolist()  # type: ignore[union-attr]


def descend_in_batches(space: ContextSpace, is_valid: Callable[[int], bool], valid_many: Callable[[list[int]], list[bool]],
                       source: Source, valid_keyed: Callable[..., list[bool]] | None = None) -> int | None:
    """`exploration.descend(space, is_valid, source)` — the same context, the same coins used —
    with the path asked `FIRST_BATCH`, then twice as many, … contexts at a time (see the module
    docstring). Only for a space and source `batchable` accepts. With `valid_keyed`
    (`Evaluator.valid_keyed`, on a space `neighbour_rows.applies` to) each batch of the path is
    asked with its keys and word rows built in numpy (`neighbour_rows.path_rows`)."""
    mask = space.full
    if is_valid(mask):
        return mask
    removable = space.shrink_bits(mask)  # the selected free values, in bit order, as `descend` lists them
    count = FIRST_BATCH
    while removable:
        count = min(count, len(removable))
        state = getattr(getattr(source, "bit_generator", None), "state", None)
        highs = np.arange(len(removable), len(removable) - count, -1, dtype=np.int64)
        path, removed, before = [], [], mask
        for j in _draws(source, highs):
            removed.append(removable.pop(j))
            mask &= ~(1 << removed[-1])
            path.append(mask)
        if valid_keyed is None:
            verdicts = valid_many(path)
        else:
            verdicts = valid_keyed(path, *path_rows(space, before, removed)[::-1])
        first = next((i for i, ok in enumerate(verdicts) if ok), None)
        if first is not None:
            if first + 1 < count and state is not None:
                source.bit_generator.state = state  # type: ignore[union-attr]
                _draws(source, highs[: first + 1])
            return path[first]
        count = min(2 * count, MOST_BATCH)
    return None
