"""`zscore_grid` (the z-score batch's sum off the grid for uniform's draws): the reference's
verdicts and sizes on many random draws over tie-heavy, births-like data, including draws whose
statistic sits exactly at the threshold (the bounds cannot decide: the reference kernel's
fallback), constant populations, and batches that mix draws with single-flip walks."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core import jit
from pcor_sql.core.verifiers.moment_kernel import cell_stats
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.core.verifiers.zscore_grid import grid_table
from pcor_sql.engine.compiled_checks import compiled_check
from tests.engine.test_wide_checks import births, reference, walks, wide  # noqa: F401 (the fixtures)


def _stat(summary, space, v, mask):
    """The reference's statistic |v − mean| / s of the context (NaN below 2 rows, 0 if s = 0)."""
    from pcor_sql.core.verifiers.base import studentized_distance

    return studentized_distance(summary.population(summary.member(space, mask), v), min_n=2)


def _draws(space, rng, count):
    return space.random_admissible_many(rng, count)


@pytest.mark.parametrize("shape", ["wide", "births"])
def test_draws_in_batches_agree_with_the_reference(shape, request):
    summary, space = request.getfixturevalue(shape)
    assert summary.count.size >= jit.WALK_CELLS
    rng = np.random.default_rng(3)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    values = summary.runs().cell_values(own)
    masks = _draws(space, rng, 300)
    stats = [_stat(summary, space, float(values[0]), m) for m in masks]
    finite = [g for g in stats if np.isfinite(g) and g > 0]
    # Thresholds around the draws' statistics, and one of them exactly: undecided, the fallback.
    for z in (float(np.median(finite)), float(finite[7]), 1.0):
        for v in (float(values[0]), float(np.median(values))):
            verifier = ZScore(z=z)
            check = compiled_check(summary, space, verifier, v)
            got = []
            for at in range(0, len(masks), 64):
                got += check.many(masks[at: at + 64])
            want = [reference(summary, space, verifier, v, m) for m in masks]
            assert got == want, (shape, z, v)
    assert grid_table(cell_stats(summary.count, summary.s1, summary.s2, summary.vmin, summary.vmax), 0.0,
                      jit.cell_index(summary.coords, space.offsets, space.t)).shape[0] > 0  # the grid path ran


def test_the_fallback_and_mixed_batches_agree_with_the_reference(wide):
    summary, space = wide
    rng = np.random.default_rng(17)
    draws = _draws(space, rng, 40)
    v = 60.0
    for target in draws[:10]:  # z at a draw's own statistic: its bounds straddle z
        z = _stat(summary, space, v, target)
        check = compiled_check(summary, space, ZScore(z=z), v)
        # Draws, a walk of flips (the walk's moves), the V-cell-only context (constant at v
        # where V's cell is), the full context, then draws again: each as the reference.
        masks = [target] + draws[10:20] + walks(space, rng, 30) + [space.v_mask, space.full] + draws[20:]
        assert check.many(masks) == [reference(summary, space, ZScore(z=z), v, m) for m in masks]


def test_no_grid_where_it_does_not_apply():
    index = jit.cell_index(np.arange(3, dtype=np.int64)[:, None], [0], 3)
    stats = np.ones((5, 3))
    table = grid_table(stats, 1.0, index)
    assert table[:, 0].tolist() == [2.0**20] * 3  # one row each, constant at v = 1
    stats[2, 1] = -1.0  # a negative s2: the walk sums as before
    assert grid_table(stats, 1.0, index).shape[0] == 0
    assert grid_table(np.ones((5, 3)), 1.0, jit.NO_INDEX).shape[0] == 0
