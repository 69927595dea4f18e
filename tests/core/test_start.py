"""The start search (`core.start.find_start`) on pure oracles: where it looks and in which
order, how many contexts it checks, that it reads validity only, and that it returns what the
search before issue 22 returned whenever the sweep from the top finds its start in time."""

from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.core.start import DEFAULT_START_CHECKS, find_start

SPACE = ContextSpace([Attribute("a", ("a0", "a1", "a2")), Attribute("b", ("b0", "b1", "b2", "b3"))], [0, 1])
ALL = [SPACE.from_free(w) for w in range(SPACE.n_admissible)]  # 2^5 = 32 admissible contexts
# 9 free bits, 512 admissible contexts: room for the sweeps to differ.
WIDER = ContextSpace([Attribute(n, tuple(range(4))) for n in "xyz"], [0, 2, 3])
# The scale benchmark's base shape: 50 × 6 × 4 values, 57 free bits.
BASE = ContextSpace([Attribute("state", tuple(range(50))), Attribute("product", tuple(range(6))),
                     Attribute("channel", tuple(range(4)))], [0, 0, 0])


class SetOracle:
    """Validity from a set; counts every question; has no utility to read."""

    def __init__(self, space, valid):
        self.space, self.valid, self.asked = space, frozenset(valid), Counter()

    def is_valid(self, mask):
        assert self.space.is_admissible(mask), "validity asked of an inadmissible context"
        self.asked[mask] += 1
        return mask in self.valid


def old_top_down(oracle, limit):
    """The sweep the search before issue 22 ran first: breadth-first down from the full
    context, neighbours in bit order; (first valid context or None, checks)."""
    space = oracle.space
    queue, seen, checks = deque([space.full]), {space.full}, 0
    while queue and checks < limit:
        mask = queue.popleft()
        checks += 1
        if oracle.is_valid(mask):
            return mask, checks
        new = [nb for nb in space.neighbours(mask) if nb not in seen]
        seen.update(new)
        queue.extend(new)
    return None, checks


def random_valid(space, seed, p):
    rng = np.random.default_rng(seed)
    return {space.from_free(w) for w in range(space.n_admissible) if rng.random() < p}


def test_vs_cell_first_then_the_full_context():
    assert find_start(SetOracle(SPACE, ALL)) == (SPACE.full, 2)
    # V's cell invalid: the near sweep checks the small contexts first (here every context).
    assert find_start(SetOracle(SPACE, {SPACE.full})) == (SPACE.full, SPACE.n_admissible)


def test_the_sweep_from_the_top_wins_when_it_finds_a_start_in_time():
    near_full = SPACE.full & ~(1 << SPACE.free_bits[0]) & ~(1 << SPACE.free_bits[1])  # two steps down
    mask, checks = find_start(SetOracle(SPACE, {SPACE.v_mask, near_full}))
    assert mask == near_full and checks > 2
    # Out of checks before it meets that context: V's cell, found first, is the start.
    assert find_start(SetOracle(SPACE, {SPACE.v_mask, near_full}), start_checks=4) == (SPACE.v_mask, 4)


def test_a_context_near_the_record_is_found_in_few_checks_on_a_wide_space():
    # The scale tables' situation: V's cell is valid, nothing near the top is.
    oracle = SetOracle(BASE, {BASE.v_mask})
    assert find_start(oracle) == (BASE.v_mask, DEFAULT_START_CHECKS)
    assert max(oracle.asked.values()) == 1
    # One value above V's cell: found by the near sweep among the first 1 + 57 contexts.
    up = BASE.v_mask | (1 << BASE.free_bits[30])
    mask, checks = find_start(SetOracle(BASE, {up}))
    assert mask == up and checks == DEFAULT_START_CHECKS


def test_without_a_valid_context_every_context_is_checked_once():
    oracle = SetOracle(SPACE, set())
    assert find_start(oracle) == (None, SPACE.n_admissible)
    assert set(oracle.asked.values()) == {1}
    assert find_start(SetOracle(SPACE, set()), max_checks=5) == (None, 5)
    wider = SetOracle(WIDER, set())
    assert find_start(wider) == (None, WIDER.n_admissible) and set(wider.asked.values()) == {1}


def test_after_both_sweeps_the_lockstep_meets_the_nearer_end_first():
    near_cell = WIDER.v_mask | (1 << WIDER.free_bits[4]) | (1 << WIDER.free_bits[7])  # two steps up
    deep = WIDER.full & ~sum(1 << b for b in WIDER.free_bits[:5])  # five steps down
    mask, checks = find_start(SetOracle(WIDER, {near_cell, deep}), near_checks=2, start_checks=4)
    assert mask == near_cell and checks > 4


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10**6), p=st.sampled_from([0.002, 0.01, 0.05, 0.3]), budget=st.integers(2, 120))
def test_the_old_start_whenever_the_old_sweep_finds_it_within_the_budget(seed, p, budget):
    valid = random_valid(WIDER, seed, p)
    new, checks = find_start(SetOracle(WIDER, valid), start_checks=budget)
    near_used = 1 if WIDER.v_mask in valid else None
    old, old_checks = old_top_down(SetOracle(WIDER, valid), 2_000)
    if near_used is not None and old is not None and old_checks <= budget - near_used:
        assert new == old
    if valid:
        assert new in valid
    else:
        assert new is None
    if near_used is not None:
        assert checks <= max(budget, 1)


@pytest.mark.parametrize("p", [0.01, 0.15, 0.6])
def test_reads_validity_only_and_is_deterministic(p):
    for seed in range(20):
        valid = random_valid(WIDER, 300 + seed, p)
        a, b = SetOracle(WIDER, valid), SetOracle(WIDER, valid)
        assert find_start(a) == find_start(b)
        assert a.asked == b.asked  # the same questions in the same number: a function of COE alone
