"""Grubbs' critical values as the compiled check reads them, and its undecided band."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.jit import NO_INDEX, NO_WORDS
from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
from pcor_sql.core.verifiers.moment_kernel import (
    EXACT_UP_TO, FALSE, TRUE, UNDECIDED, cell_stats, grubbs_kernel, grubbs_table, table_rows,
)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.3])
def test_the_exact_part_of_the_table_is_grubbs_critical_one(alpha):
    table = grubbs_table(alpha, 10)
    for n in range(3, EXACT_UP_TO + 1):
        assert table.crit[n] == grubbs_critical_one(alpha, n)  # equality of two computations


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.3])
def test_critical_values_rise_with_n(alpha):
    """The bracketing above EXACT_UP_TO rests on this (with a 1e-9 relative margin)."""
    table = grubbs_table(alpha, 10**9)
    crit = table.crit[3:]
    assert np.all(np.diff(crit) > 0)
    assert table.n[-1] >= 10**9
    dense = np.array([grubbs_critical_one(alpha, n) for n in range(EXACT_UP_TO, EXACT_UP_TO + 3000)])
    assert np.all(np.diff(dense) > 0)


def _one_cell(n: int) -> np.ndarray:
    """One cell of n rows with mean 0 and s = 1, so that the statistic is |v| exactly."""
    return cell_stats(np.array([n]), np.array([0.0]), np.array([n - 1.0]), np.array([-1e9]), np.array([1e9]))


@pytest.mark.parametrize("n", [50, 1500, 77_777, 5_000_001])
def test_the_kernel_decides_as_the_reference_or_leaves_it_undecided(n):
    alpha = 0.05
    table = table_rows(grubbs_table(alpha, 10**7))
    crit = grubbs_critical_one(alpha, n)
    flat = np.zeros((1, 4), dtype=np.int64)
    stats = _one_cell(n)
    seen = set()
    for v in (crit * 0.9, crit * (1 - 1e-7), np.nextafter(crit, 0), crit, np.nextafter(crit, 9), crit * (1 + 1e-7), crit * 1.1):
        code, got_n = grubbs_kernel(1, NO_WORDS, flat, NO_INDEX, stats, 0.0, v, table)
        assert got_n == n
        seen.add(code)
        if code != UNDECIDED:
            assert (code == TRUE) == (v > crit), (n, v, crit)
    assert {FALSE, TRUE} <= seen
    assert (UNDECIDED in seen) == (n > EXACT_UP_TO and n not in table[0])
