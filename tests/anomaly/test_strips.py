"""Strip counting in several dimensions: every refinement c agrees exactly with brute force."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.anomaly.balls import ball_counts
from pcor_sql.anomaly.strips import strip_ball_counts
from tests.anomaly.brute import tied, within


@pytest.mark.parametrize("refinement", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_every_refinement_agrees_with_brute_force(norm, refinement):
    """Whole runs (counted by cumulative weight) and the shell (checked pair by pair) add up exactly."""
    rng = np.random.default_rng(refinement)
    for d, step in ((2, 1.0), (2, 0.1), (3, 1.0)):
        data = np.unique(tied(rng, 500, d, step), axis=0)
        weights = rng.integers(1, 4, data.shape[0])
        queries = np.concatenate([data[::3], tied(rng, 20, d, step)])
        for r in (step, 2.5 * step, 4 * step, 0.3):
            got = strip_ball_counts(data, weights, queries, r, norm, refinement=refinement)
            expected = [int(weights[within(data, q, r, norm)].sum()) for q in queries]
            np.testing.assert_array_equal(got, expected, err_msg=f"d={d} step={step} r={r}")


@pytest.mark.parametrize(
    "name",
    ["huge offset", "tiny", "mixed scale", "identical", "negatives", "subnormal differences"],
)
def test_extreme_scales_agree_with_brute_force(name):
    """The margins are relative to the data's scale and r: exact far from unit magnitudes too."""
    rng = np.random.default_rng(0)
    base = rng.integers(-5, 5, (200, 2)).astype(float)
    data, radii = {
        "huge offset": (base * 1e-3 + 1e12, [0, 1e-3, 2e-3, 0.5]),
        "tiny": (base * 1e-200, [0, 1e-200, 3e-200]),
        "mixed scale": (np.stack([base[:, 0] * 1e9, base[:, 1] * 1e-9], 1), [0, 1e-9, 1e9, 2e9]),
        "identical": (np.ones((50, 3)), [0, 1]),
        "negatives": (-np.abs(rng.normal(0, 1, (200, 3))).round(1), [0, 0.1, 0.3, 1.0]),
        "subnormal differences": (np.stack([np.full(100, 1e-300), np.arange(100) * 1e-310], 1), [0, 1e-309, 1e-308]),
    }[name]
    up, weights = np.unique(data, axis=0, return_counts=True)
    for r in radii:
        for norm in ("l1", "l2", "linf"):
            want = [np.count_nonzero(within(data, q, r, norm)) for q in data]
            np.testing.assert_array_equal(ball_counts(data, data, r, norm).ball, want, err_msg=f"{r} {norm}")
            for c in (1, 3, 8):
                got = strip_ball_counts(up, weights, up, r, norm, refinement=c)
                np.testing.assert_array_equal(got, [weights[within(up, q, r, norm)].sum() for q in up])
