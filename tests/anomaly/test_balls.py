"""Ball counts agree exactly with a brute-force O(N²) count (the reference float expressions)."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.anomaly.balls import ball_counts
from pcor_sql.errors import UserError
from tests.anomaly.brute import brute_force, tied


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("step", [1.0, 0.1])
def test_agrees_with_brute_force(d, norm, step):
    rng = np.random.default_rng(17 * d + int(step * 10))
    data = tied(rng, 400, d, step)
    queries = np.concatenate([data[:150], tied(rng, 30, d, step)])  # some queries not in the data
    for r in (0.0, step, 2 * step, 3.0 * step, 0.3, 2.5 * step, 100.0):
        got = ball_counts(data, queries, r, norm)
        mult, ball = brute_force(data, queries, r, norm)
        np.testing.assert_array_equal(got.multiplicity, mult, err_msg=f"r={r}")
        np.testing.assert_array_equal(got.ball, ball, err_msg=f"r={r}")


def test_float_boundaries_on_decimal_grid():
    """0.1-steps: many differences round to just below or above r = 0.3 (the fix-up's job)."""
    data = np.round(np.arange(0, 5, 0.1), 10)
    data = np.concatenate([data, data[::3], -data])
    for r in (0.1, 0.2, 0.3, 0.7, 1.1):
        got = ball_counts(data, data, r, "l2")
        mult, ball = brute_force(data, data, r, "l2")
        np.testing.assert_array_equal(got.ball, ball, err_msg=f"r={r}")
        np.testing.assert_array_equal(got.multiplicity, mult)
        two = np.stack([data, data[::-1]], axis=1)
        for norm in ("l1", "l2", "linf"):
            g2 = ball_counts(two, two, r, norm)
            np.testing.assert_array_equal(g2.ball, brute_force(two, two, r, norm)[1], err_msg=f"{norm} r={r}")


def test_signed_zero_is_one_value():
    got = ball_counts([0.0, -0.0, 1.0], [-0.0], 0.0, "l1")
    assert got.multiplicity.tolist() == [2] and got.ball.tolist() == [2]


def test_bad_norm_and_radius():
    with pytest.raises(UserError, match="norm"):
        ball_counts([1.0], [1.0], 1.0, "manhattan")
    with pytest.raises(UserError, match="radius"):
        ball_counts([1.0], [1.0], -1.0, "l1")
