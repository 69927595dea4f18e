"""Every search on spaces with ordinal attributes (DESIGN.md §2): what it asks about and what it
releases are admissible contexts — on an ordinal attribute, one run of bins holding V's bin.

A pure oracle with a random valid set (hypothesis) stands in for the data; it refuses to be
asked about an inadmissible context, so a search that stepped off the intervals fails here.
The exponential mechanism and the accounting are the plain ones (`test_searches`)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.exploration import collect, random_descents
from pcor_sql.core.search_specs import SEARCH_SPECS, run_search
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.core.start import find_start
from pcor_sql.errors import NoValidContext

from test_space_ordinal import admissible_by_definition, spaces


class IntervalOracle:
    """Validity from a set of admissible contexts, utility = weight; every question checked."""

    def __init__(self, space, valid):
        self.space = space
        self.valid = frozenset(valid)
        self.asked = set()

    def is_valid(self, mask):
        assert admissible_by_definition(self.space, mask) and 0 <= mask <= self.space.full, "asked off the lattice"
        self.asked.add(mask)
        return mask in self.valid

    def utility(self, mask):
        assert mask in self.valid
        return float(mask.bit_count())

    def coe(self, max_admissible, progress=None):
        masks = [self.space.from_free(w) for w in range(self.space.n_admissible)]
        masks = [m for m in masks if m in self.valid]
        return np.asarray(masks, dtype=object), np.asarray([self.utility(m) for m in masks], dtype=np.float64)


def holds_v_in_one_run(space, mask):
    for i, attr in enumerate(space.attributes):
        if attr.ordinal:
            lo, hi = space.run(mask, i)
            selected = space.selected_indices(mask, i)
            if selected != list(range(lo, hi + 1)) or not lo <= space.anchor[i] <= hi:
                return False
    return True


@st.composite
def cases(draw):
    space = draw(spaces(max_t=10).filter(lambda s: s.ordinal))
    admissible = [space.from_free(w) for w in range(space.n_admissible)]
    valid = [m for m in admissible if draw(st.booleans())] or [admissible[-1]]
    return space, valid, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(cases(), st.sampled_from(sorted(SEARCH_SPECS)))
def test_every_search_asks_and_releases_runs_of_bins_holding_v(case, name):
    space, valid, seed = case
    oracle = IntervalOracle(space, valid)
    start, _ = find_start(oracle)
    spec = SEARCH_SPECS[name]
    if spec.graph and start is None:
        return
    try:
        result = run_search(name, oracle, 0.5, np.random.default_rng(seed), start=start, samples=8, descents=4,
                            max_admissible=1 << 20, max_checks=200, max_draws=500)
    except NoValidContext:
        assert name == "uniform"  # it may draw no valid context; the others start from one
        return
    assert result.mask in oracle.valid and holds_v_in_one_run(space, result.mask)
    assert all(holds_v_in_one_run(space, m) for m in result.trace.visited)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_exploration_within_budget_collects_exactly_coe(case):
    space, valid, seed = case
    found = collect(IntervalOracle(space, valid), np.random.default_rng(seed), samples=10_000, max_checks=10_000)
    assert set(found.valid) == set(valid)
    assert set(found.checked) == {space.from_free(w) for w in range(space.n_admissible)}


def test_descents_remove_bins_at_the_ends_only():
    space = ContextSpace([Attribute.binned("age", list(range(0, 90, 10))), Attribute("c", ("x", "y"))], [4, 0])
    oracle = IntervalOracle(space, [space.v_mask])  # only V's own cell is valid: descents go all the way
    assert random_descents(oracle, np.random.default_rng(3), 5) == [space.v_mask]
    assert all(holds_v_in_one_run(space, m) for m in oracle.asked)
    assert len(oracle.asked) > 5


def test_uniform_releases_from_a_uniform_sample_of_runs():
    """The uniform search's draws (`random_admissible`): 1,800 seeded draws over the 9 runs of
    one ordinal attribute, each count Binomial(1800, 1/9) (sd ≈ 13) within a 6-sd band; with
    every context valid, the search collects all 9."""
    space = ContextSpace([Attribute.binned("age", [0, 1, 2, 3, 4, 5])], [2])
    assert space.n_admissible == 3 * 3
    oracle = IntervalOracle(space, [space.from_free(w) for w in range(space.n_admissible)])
    rng = np.random.default_rng(17)
    index = {space.from_free(w): w for w in range(space.n_admissible)}
    counts = np.zeros(space.n_admissible)
    for _ in range(1800):
        counts[index[space.random_admissible(rng)]] += 1
    expected = 1800 / 9
    assert np.all(np.abs(counts - expected) < 6 * math.sqrt(expected * (1 - 1 / 9)))
    result = run_search("uniform", oracle, 0.5, rng, start=None, samples=9, max_draws=10_000)
    assert sorted(result.trace.visited) == sorted(oracle.valid)


@pytest.mark.parametrize("name", sorted(SEARCH_SPECS))
def test_one_ordinal_attribute_alone(name):
    space = ContextSpace([Attribute.binned("age", [18, 25, 35, 45, 55, 65, 81])], [3])
    valid = [m for m in (space.from_free(w) for w in range(space.n_admissible)) if m.bit_count() <= 3]
    oracle = IntervalOracle(space, valid)
    start, _ = find_start(oracle)
    result = run_search(name, oracle, 1.0, np.random.default_rng(0), start=start, samples=5, max_admissible=100)
    assert result.mask in valid and holds_v_in_one_run(space, result.mask)


class AnyMaskOracle:
    """Validity of every mask, admissible or not (a random set): a descent that steps off the
    runs of bins can then stop on an inadmissible context, and the test sees it returned."""

    def __init__(self, space, rng, density):
        self.space = space
        self.valid = rng.random(space.full + 1) < density
        self.asked = set()

    def is_valid(self, mask):
        self.asked.add(mask)
        return bool(self.valid[mask])


@settings(max_examples=80, deadline=None)
@given(spaces(max_t=10).filter(lambda s: s.ordinal), st.integers(0, 2**32 - 1), st.sampled_from([0.05, 0.3, 0.7]))
def test_start_random_descents_return_admissible_contexts_holding_v(space, seed, density):
    """`core.start.random_descents` (BFS's extra starts, the paper profile's C_V): every context
    it returns, and every one it asks about, is admissible — V's values kept, one run of bins
    on each ordinal attribute."""
    from pcor_sql.core import start

    oracle = AnyMaskOracle(space, np.random.default_rng(seed), density)
    found = start.random_descents(oracle, np.random.default_rng(seed + 1), 6)
    for mask in found:
        assert space.is_admissible(mask) and admissible_by_definition(space, mask)
        assert mask & space.v_mask == space.v_mask and oracle.valid[mask]
    assert all(admissible_by_definition(space, m) for m in oracle.asked)
