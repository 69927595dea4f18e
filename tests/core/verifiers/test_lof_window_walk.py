"""`lof_window_walk`'s reading of the window counts (its checks against the reference:
tests/engine/test_wide_checks.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.lof_window_walk import _next_nonzero


def _one_at_a_time(cnt, at, step):
    while 0 <= at < cnt.size and cnt[at] == 0:
        at += step
    return at


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3).map(lambda x: x if x == 3 else 0), max_size=70), st.data())
def test_the_next_nonzero_count_is_found_as_one_at_a_time(counts, data):
    # Mostly zeros, runs longer and shorter than the eight read at once, both ends of the window.
    cnt = np.asarray(counts, dtype=np.int64)
    at = data.draw(st.integers(-1, cnt.size))
    for step in (1, -1):
        if step == 1 and at < 0 or step == -1 and at >= cnt.size:
            continue  # a side starts at most one past its end (`window_start`: dv ∓ 1)
        assert _next_nonzero(cnt, at, step) == _one_at_a_time(cnt, at, step), (counts, at, step)


def test_long_runs_of_zeros():
    cnt = np.zeros(1000, dtype=np.int64)
    cnt[[0, 17, 500, 999]] = [1, 2, 3, 4]
    assert [_next_nonzero(cnt, a, 1) for a in (1, 18, 501, 999)] == [17, 500, 999, 999]
    assert [_next_nonzero(cnt, a, -1) for a in (998, 499, 16, 0)] == [500, 17, 0, 0]
    assert _next_nonzero(np.zeros(30, dtype=np.int64), 29, -1) == -1
    assert _next_nonzero(np.zeros(30, dtype=np.int64), 0, 1) == 30
