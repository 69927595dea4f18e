"""Finding a starting context C_V by a deterministic search that reads validity only.

The result is a function of COE(D, V) alone (the order of visits is fixed by the lattice, not
by the data), so under OCDP it costs no privacy budget (DESIGN.md §2).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from pcor_sql.core.randomness import Source
from pcor_sql.core.space import ContextSpace

DEFAULT_MAX_CHECKS = 20_000
DEFAULT_DOWN_CHECKS = 2_000
DEFAULT_DESCENTS = 24


class ValidityOracle(Protocol):
    space: ContextSpace

    def is_valid(self, mask: int) -> bool: ...


def find_start(
    oracle: ValidityOracle, max_checks: int = DEFAULT_MAX_CHECKS, down_checks: int = DEFAULT_DOWN_CHECKS
) -> tuple[int | None, int]:
    """(a valid context or None, contexts checked).

    First a breadth-first sweep down from the full context, for at most `down_checks`
    contexts: the valid context it meets first is among the largest, which is where the
    utilities point, so the private search starts close to its target instead of many
    EM-guided steps away. If that finds nothing, two breadth-first sweeps run in lockstep: one
    up from V's own cell (the smallest admissible context, where a contextual outlier usually
    shows) and one further down from the full context. Neighbours are visited in bit order.
    """
    space = oracle.space
    down = deque([space.full])
    seen = {space.full}
    checks = 0
    while down and checks < min(down_checks, max_checks):
        mask = down.popleft()
        checks += 1
        if oracle.is_valid(mask):
            return mask, checks
        _extend(space, mask, down, seen)
    up = deque([space.v_mask]) if space.v_mask not in seen else deque()
    seen.add(space.v_mask)
    queues = (up, down)
    while checks < max_checks and any(queues):
        for q in queues:
            if not q or checks >= max_checks:
                continue
            mask = q.popleft()
            checks += 1
            if oracle.is_valid(mask):
                return mask, checks
            _extend(space, mask, q, seen)
    return None, checks


def _extend(space: ContextSpace, mask: int, queue: deque, seen: set[int]) -> None:
    # One comprehension and bulk updates: this runs once per neighbour of every context the
    # sweeps check, i.e. checks × free bits times (millions on a 500-value space).
    new = [nb for nb in space.neighbours(mask) if nb not in seen]
    seen.update(new)
    queue.extend(new)


def random_descents(oracle: ValidityOracle, source: Source, count: int) -> list[int]:
    """Up to `count` valid contexts, each the first valid one met on a uniformly random walk
    down from the full context (one random selected free value removed per step).

    Every step reads validity only, and the coins come from `source` independently of the
    data, so the law of the result is a function of COE(D, V) alone: equal on OCDP
    neighbours, hence free. The contexts are large (few values removed), which is where the
    utilities point; BFS adds them to its starting frontier.
    """
    space = oracle.space
    found: dict[int, None] = {}
    for _ in range(count):
        mask = space.full
        while not oracle.is_valid(mask):
            selected = [b for b in space.free_bits if (mask >> b) & 1]
            if not selected:
                break
            mask &= ~(1 << selected[int(source.integers(0, len(selected)))])
        else:
            found[mask] = None
    return list(found)
