"""Finding a starting context C_V by a deterministic search that reads validity only.

The result is a function of COE(D, V) alone (the order of visits is fixed by the lattice, not
by the data), so under OCDP it costs no privacy budget (DESIGN.md §2).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from pcor_sql.core.space import ContextSpace

DEFAULT_MAX_CHECKS = 20_000


class ValidityOracle(Protocol):
    space: ContextSpace

    def is_valid(self, mask: int) -> bool: ...


def find_start(oracle: ValidityOracle, max_checks: int = DEFAULT_MAX_CHECKS) -> tuple[int | None, int]:
    """(a valid context or None, contexts checked).

    Two breadth-first sweeps of the lattice run in lockstep: one up from V's own cell (the
    smallest admissible context, where a contextual outlier usually shows), one down from the
    full context (where a global outlier shows). Neighbours are visited in bit order.
    """
    space = oracle.space
    queues = (deque([space.v_mask]), deque([space.full]))
    seen = {space.v_mask, space.full}
    checks = 0
    while checks < max_checks and any(queues):
        for q in queues:
            if not q or checks >= max_checks:
                continue
            mask = q.popleft()
            checks += 1
            if oracle.is_valid(mask):
                return mask, checks
            for nb in space.neighbours(mask):
                if nb not in seen:
                    seen.add(nb)
                    q.append(nb)
    return None, checks
