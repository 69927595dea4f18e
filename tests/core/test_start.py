"""The start search (`core.start.find_start`) on pure oracles: where it looks and in which
order, how many contexts it checks, that it reads validity only, and that it returns what the
search before the start-search returned whenever the sweep from the top finds its start in time."""

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
    """The sweep the old search ran first: breadth-first down from the full
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


class Asked(SetOracle):
    """A SetOracle that keeps its questions in order."""

    def __init__(self, space, valid):
        super().__init__(space, valid)
        self.order = []

    def is_valid(self, mask):
        self.order.append(mask)
        return super().is_valid(mask)


def eager_find_start(oracle, max_checks=20_000, near_checks=64, start_checks=DEFAULT_START_CHECKS):
    """`find_start` as it was before the wide spaces' indexed checks: each sweep queued all of a context's unmet
    neighbours when it found it invalid. The lazy sweeps must ask the same questions in order."""
    space, verdicts = oracle.space, {}

    def ask(mask):
        if mask not in verdicts:
            if len(verdicts) >= max_checks:
                return None
            verdicts[mask] = oracle.is_valid(mask)
        return verdicts[mask]

    def sweep(origin):
        return {"queue": deque([origin]), "seen": {origin}, "found": origin}

    def step(s):
        mask = s["queue"][0]
        verdict = ask(mask)
        if verdict is None:
            return None
        s["queue"].popleft()
        s["found"] = mask
        if not verdict:
            new = [nb for nb in space.neighbours(mask) if nb not in s["seen"]]
            s["seen"].update(new)
            s["queue"].extend(new)
        return verdict

    def run(s, limit):
        while s["queue"] and len(verdicts) < limit:
            if step(s):
                return s["found"]
        return None

    up, down = sweep(space.v_mask), sweep(space.full)
    near, top = run(up, min(near_checks, max_checks)), run(down, min(start_checks, max_checks))
    found = top if top is not None else near
    while found is None and any(s["queue"] for s in (up, down)):
        for s in (up, down):
            if s["queue"]:
                verdict = step(s)
                if verdict is None:
                    return None, len(verdicts)
                if verdict:
                    return s["found"], len(verdicts)
    return found, len(verdicts)


ORDINAL = ContextSpace([Attribute.binned("o", (-np.inf, 1, 2, 3, 4, np.inf)), Attribute("c", tuple(range(4)))], [2, 1])


@pytest.mark.parametrize("space", [SPACE, WIDER, ORDINAL], ids=["small", "wider", "ordinal"])
@pytest.mark.parametrize("p", [0.0, 0.003, 0.02, 0.2])
def test_the_lazy_sweeps_ask_what_the_eager_ones_asked_in_the_same_order(space, p):
    for seed in range(12):
        valid = random_valid(space, 900 + seed, p)
        for budget in (2, 9, 40):
            lazy, eager = Asked(space, valid), Asked(space, valid)
            kwargs = dict(near_checks=budget // 2 + 1, start_checks=budget, max_checks=4 * budget)
            assert find_start(lazy, **kwargs) == eager_find_start(eager, **kwargs)
            assert lazy.order == eager.order


class CountingFlips(ContextSpace):
    """Counts the neighbours a sweep draws (through `neighbour_flips`)."""

    drawn = 0

    def neighbour_flips(self, mask):
        for flip in super().neighbour_flips(mask):
            CountingFlips.drawn += 1
            yield flip


def test_a_sweep_on_thousands_of_values_draws_about_the_neighbours_it_checks():
    # Issue 28's 5,000-value attribute: a sweep that queued every neighbour of every invalid
    # context built checks × 5,002 of them (25 million at the 20,000 checks of a failed start).
    space = CountingFlips([Attribute("item", tuple(range(5000))), Attribute("kind", tuple(range(4)))], [0, 0])
    CountingFlips.drawn = 0
    oracle = SetOracle(space, set())
    assert find_start(oracle, max_checks=2_000) == (None, 2_000)
    assert 0 < CountingFlips.drawn <= 2 * 2_000 + 2 * 5_002
