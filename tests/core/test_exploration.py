"""The moves of `core.exploration`'s descents and climbs: collapses, one-value climbs and their
coins. The search as a whole (validity only, caps, law of the release) is in `test_searches`;
on ordinal spaces in `test_searches_ordinal`."""

from __future__ import annotations

import numpy as np
from scipy import stats

from pcor_sql.core.exploration import DEFAULT_COLLAPSE, _Explorer, collect
from pcor_sql.core.space import Attribute, ContextSpace

from test_space_ordinal import admissible_by_definition

# V holds a0, b1 and c2: 2 + 3 + 3 = 8 free values, 256 admissible contexts.
SPACE = ContextSpace([Attribute("a", ("a0", "a1", "a2")), Attribute("b", ("b0", "b1", "b2", "b3")),
                      Attribute("c", ("c0", "c1", "c2", "c3"))], [0, 1, 2])


class SetOracle:
    """Validity from a set; refuses inadmissible questions and counts the questions."""

    def __init__(self, space, valid):
        self.space, self.valid, self.asked = space, frozenset(valid), []

    def is_valid(self, mask):
        assert admissible_by_definition(self.space, mask) and 0 <= mask <= self.space.full
        self.asked.append(mask)
        return mask in self.valid


def test_a_collapse_leaves_one_attribute_at_vs_own_value():
    # Every step collapses (collapse = 1): from the full context, V's cell is m = 3 steps away
    # whatever the order, against 8 single removals.
    oracle = SetOracle(SPACE, {SPACE.v_mask})
    for seed in range(20):
        ex = _Explorer(oracle, np.random.default_rng(seed), 10, 1000, collapse=1)
        assert ex.descend() == SPACE.v_mask
        assert len(ex.out.checked) == 1 + SPACE.m
        for mask in list(ex.out.checked)[1:]:
            # each context met has some attributes whole and the others at V's value alone
            assert all(SPACE.is_full(mask, i) or SPACE.selected_indices(mask, i) == [SPACE.anchor[i]]
                       for i in range(SPACE.m))


def test_without_collapses_a_descent_removes_one_value_at_a_time():
    oracle = SetOracle(SPACE, {SPACE.v_mask})
    ex = _Explorer(oracle, np.random.default_rng(0), 10, 1000, collapse=0)
    assert ex.descend() == SPACE.v_mask
    weights = [m.bit_count() for m in ex.out.checked]
    assert weights == list(range(SPACE.full.bit_count(), SPACE.m - 1, -1))


def test_collapses_happen_in_one_step_of_collapse():
    """Seeded: with nothing but V's cell valid and collapse = 4, a descent's steps are collapses
    with probability 1/4 (a step that collapses an attribute holding one free value is counted as a removal, so
    the attributes here hold ≥ 2). Over 600 descents, the collapse count of the first step is
    Binomial(600, 1/4) (sd ≈ 10.6); asserted within 5 sd."""
    oracle = SetOracle(SPACE, {SPACE.v_mask})
    first = []
    for seed in range(600):
        ex = _Explorer(oracle, np.random.default_rng([seed, 1]), 10, 1000, collapse=4)
        ex.descend()
        second = list(ex.out.checked)[1]
        first.append(SPACE.full.bit_count() - second.bit_count() > 1)
    n, p = len(first), 1 / 4
    assert abs(sum(first) - n * p) <= 5 * (n * p * (1 - p)) ** 0.5


def test_a_climb_step_tries_the_missing_values_in_uniform_order():
    """Seeded: from V's cell with every context valid, the first value a climb adds is uniform
    over the 8 missing ones: 4,000 climbs, chi-square goodness of fit at p > 1e-4."""
    oracle = SetOracle(SPACE, [SPACE.from_free(w) for w in range(SPACE.n_admissible)])
    counts = {b: 0 for b in SPACE.grow_bits(SPACE.v_mask)}
    rng = np.random.default_rng(5)
    for _ in range(4000):
        ex = _Explorer(oracle, rng, 10, 1000, collapse=0)
        up = ex.step_up(SPACE.v_mask, SPACE.grow_bits(SPACE.v_mask))
        counts[(up ^ SPACE.v_mask).bit_length() - 1] += 1
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


def test_a_climb_ends_where_no_single_value_is_valid():
    # Valid: V's cell, then a1 added, then a1 and b0 added; nothing one value above is valid.
    def ctx(a, b):
        return SPACE.from_values({"a": a, "b": b, "c": ["c2"]})

    valid = {SPACE.v_mask, ctx(["a0", "a1"], ["b1"]), ctx(["a0", "a1"], ["b0", "b1"])}
    for seed in range(10):
        ex = _Explorer(SetOracle(SPACE, valid), np.random.default_rng(seed), 10, 1000, collapse=0)
        assert ex.climb(SPACE.v_mask) == ctx(["a0", "a1"], ["b0", "b1"])
        # it asked every single value above the top, and nothing two values above anything
        top = ctx(["a0", "a1"], ["b0", "b1"])
        assert all(top | (1 << b) in ex.out.checked for b in SPACE.grow_bits(top))
        assert all(m.bit_count() <= top.bit_count() + 1 for m in ex.out.checked)


def test_collapses_are_off_by_default():
    oracle = SetOracle(SPACE, {SPACE.v_mask})
    ex = _Explorer(oracle, np.random.default_rng(0), 10, 1000, collapse=DEFAULT_COLLAPSE)
    ex.descend()
    assert len(ex.out.checked) == SPACE.full.bit_count() - SPACE.m + 1  # one value at a time


def test_collect_with_collapses_stays_on_runs_of_bins():
    space = ContextSpace([Attribute.binned("age", list(range(0, 90, 10))), Attribute("c", ("x", "y", "z"))], [4, 1])
    oracle = SetOracle(space, {space.v_mask})  # the assertion in is_valid checks every question
    found = collect(oracle, np.random.default_rng(2), samples=100, max_checks=50, collapse=1)
    assert list(found.valid) == [space.v_mask]
