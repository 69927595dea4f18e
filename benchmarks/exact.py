"""The largest utility in COE(D, V), exactly, without verifying all 2^22 contexts.

The utility ratio of a release divides by max{u(C) : C ∈ COE(D, V)}. Both utilities are
functions of population sizes alone, and the sizes of all admissible contexts come out of one
vectorised pass over the per-cell summary (`OutlierRun.lattice_sizes`): so the contexts can
be put in decreasing order of utility *before* any is verified, and the first valid one in
that order has the largest utility among the valid ones — the same number an enumeration of
the whole COE (`pcor_sql.coe`) gives, after verifying only the contexts above it. For LOF on
salaries that is thousands of checks instead of 4.2 million (seconds instead of ~20 minutes).
`population`: u(C) = |D_C|. `overlap`: u(C) = |D_{C ∧ C_V}|, C_V the starting context.

This is the data owner's exact tool for evaluating releases; it is not private and its output
is never released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pcor_sql.core.space import ContextSpace

_CHUNK = 4096  # contexts turned into Python ints at a time (never all 4.2M at once)


@dataclass(frozen=True)
class ExactMax:
    """The largest utility over COE(D, V) (None: no valid context among `checks` verified)."""

    utility: float | None
    mask: int | None
    checks: int
    exhausted: bool  # True when every admissible context was verified (so COE is empty if None)


def free_word(space: ContextSpace, mask: int) -> int:
    """The free-bit word of an admissible context (inverse of `space.from_free`)."""
    return sum(1 << i for i, b in enumerate(space.free_bits) if (mask >> b) & 1)


def utilities_by_word(sizes: np.ndarray, utility: str, space: ContextSpace, start_mask: int | None) -> np.ndarray:
    if utility == "population":
        return sizes
    if start_mask is None:
        raise ValueError("overlap utility needs the starting context")
    words = np.arange(sizes.size, dtype=np.int64)
    return sizes[words & free_word(space, start_mask)]


def best_first_max(oracle: Any, space: ContextSpace, utilities: np.ndarray, max_checks: int) -> ExactMax:
    """Verify contexts of `space` (by `oracle.is_valid`) in decreasing utility until the first
    valid one (or `max_checks`)."""
    order = np.argsort(-utilities, kind="stable")
    checks = 0
    for at in range(0, order.size, _CHUNK):
        for w in order[at : at + _CHUNK].tolist():
            if checks >= max_checks:
                return ExactMax(None, None, checks, False)
            checks += 1
            mask = space.from_free(w)
            if oracle.is_valid(mask):
                return ExactMax(float(utilities[w]), mask, checks, False)
    return ExactMax(None, None, checks, True)
