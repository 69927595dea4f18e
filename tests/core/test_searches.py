"""The five searches and the start search on a fake, pure oracle (no DuckDB).

The oracle holds a fixed set of valid contexts and a utility table, and counts how often it
is asked; the exponential mechanism is wrapped to count the calls a search really makes.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core import searches
from pcor_sql.core.mechanism import em_probabilities
from pcor_sql.core.searches import bfs, dfs, direct, explore, random_walk, uniform
from pcor_sql.core.search_specs import run_search
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.core.start import find_start
from pcor_sql.errors import InternalError, NoValidContext, UserError

P_MIN = 1e-3
SPACE = ContextSpace([Attribute("a", ("a0", "a1", "a2")), Attribute("b", ("b0", "b1", "b2", "b3"))], [0, 1])
ALL = [SPACE.from_free(w) for w in range(SPACE.n_admissible)]  # 2^5 = 32 admissible contexts


class FakeOracle:
    """Validity from a set, utility from a table (default: the context's weight)."""

    def __init__(self, space, valid, utilities=None):
        self.space = space
        self.valid = frozenset(valid)
        self.utilities = dict(utilities) if utilities is not None else {m: float(m.bit_count()) for m in ALL}
        self.validity_asked = Counter()
        self.utility_asked = Counter()

    def is_valid(self, mask):
        assert self.space.is_admissible(mask), "validity asked of an inadmissible context"
        self.validity_asked[mask] += 1
        return mask in self.valid

    def utility(self, mask):
        assert mask in self.valid, "utility asked of an invalid context"
        self.utility_asked[mask] += 1
        return self.utilities[mask]

    def coe(self, max_admissible, progress=None):
        if self.space.n_admissible > max_admissible:
            raise UserError("too many contexts", "raise the limit")
        masks = [m for m in ALL if m in self.valid]
        return np.asarray(masks, dtype=np.int64), np.asarray([self.utilities[m] for m in masks], dtype=np.float64)


class CountingSource:
    """A seeded generator that counts calls to `random` (uniform's draws)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.random_calls = 0

    def random(self, size=None):
        self.random_calls += 1
        return self.rng.random(size)

    def integers(self, low, high=None):
        return self.rng.integers(low, high)


@pytest.fixture
def em_counter(monkeypatch):
    """Count the exponential-mechanism calls a search really makes (and their sizes)."""
    calls = []
    real = searches.exponential_mechanism

    def counting(utilities, eps1, source, sensitivity=1.0):
        calls.append(len(utilities))
        return real(utilities, eps1, source, sensitivity)

    monkeypatch.setattr(searches, "exponential_mechanism", counting)
    return calls


def random_valid_set(seed, p=0.6):
    rng = np.random.default_rng(seed)
    return {m for m in ALL if rng.random() < p}


def hamming1(a, b):
    return (a ^ b).bit_count() == 1


def connected_in_order(visited):
    """Each visited context after the first is a neighbour of an earlier one."""
    return all(any(hamming1(v, u) for u in visited[:i]) for i, v in enumerate(visited) if i)


# -- direct ----------------------------------------------------------------------------


def test_direct_picks_from_coe_with_one_em_call(em_counter):
    valid = random_valid_set(1)
    oracle = FakeOracle(SPACE, valid)
    res = direct(oracle, 0.5, np.random.default_rng(0), max_admissible=1 << 10)
    assert res.mask in valid
    assert sorted(res.trace.visited) == sorted(valid)
    assert res.trace.n_em_calls == 1 == len(em_counter)
    assert em_counter == [len(valid)]


def test_direct_law_on_the_fake_oracle():
    valid = sorted(random_valid_set(2))
    util = {m: float(m.bit_count()) + (m % 3) for m in ALL}
    oracle = FakeOracle(SPACE, valid, util)
    counts = Counter(direct(oracle, 0.4, np.random.default_rng(s), max_admissible=64).mask for s in range(8_000))
    p = em_probabilities([util[m] for m in valid], 0.4)
    observed = np.array([counts[m] for m in valid], dtype=float)
    assert stats.chisquare(observed, p * observed.sum()).pvalue >= P_MIN


def test_direct_without_valid_context_and_size_guard():
    with pytest.raises(NoValidContext):
        direct(FakeOracle(SPACE, set()), 0.5, np.random.default_rng(0), max_admissible=1 << 10)
    with pytest.raises(UserError):
        run_search("direct", FakeOracle(SPACE, ALL), 0.5, np.random.default_rng(0), start=None, max_contexts=16)


# -- uniform ---------------------------------------------------------------------------


def test_uniform_finds_n_distinct_valid_contexts(em_counter):
    valid = random_valid_set(3)
    oracle = FakeOracle(SPACE, valid)
    res = uniform(oracle, 0.5, np.random.default_rng(4), samples=8)
    assert len(res.trace.visited) == 8 == len(set(res.trace.visited))
    assert set(res.trace.visited) <= valid
    assert res.mask in res.trace.visited
    assert res.trace.notes == []
    assert res.trace.n_em_calls == 1 and em_counter == [8]
    # a context already found valid is never asked again
    assert all(oracle.validity_asked[m] == 1 for m in res.trace.visited)


def test_uniform_draws_are_uniform_over_admissible_contexts():
    # With one sample and every context valid, the released context is the first draw.
    oracle = FakeOracle(SPACE, ALL)
    counts = Counter(uniform(oracle, 1.0, np.random.default_rng(s), samples=1).mask for s in range(6_400))
    assert set(counts) == set(ALL)
    assert stats.chisquare([counts[m] for m in ALL]).pvalue >= P_MIN


def test_uniform_stops_at_max_draws_and_says_it_ran_out():
    only = SPACE.from_free(0b10110)
    oracle = FakeOracle(SPACE, {only})
    src = CountingSource(5)
    res = uniform(oracle, 1.0, src, samples=5, max_draws=300)
    assert src.random_calls == 300  # one vector of coin flips per draw, and the final EM over one candidate draws nothing
    assert res.mask == only and res.trace.visited == [only]
    assert len(res.trace.notes) == 1
    assert "ran out" in res.trace.notes[0] and "1 of 5" in res.trace.notes[0] and "300 draws" in res.trace.notes[0]


def test_uniform_with_no_valid_context_raises_after_its_draws():
    src = CountingSource(6)
    with pytest.raises(NoValidContext):
        uniform(FakeOracle(SPACE, set()), 1.0, src, samples=5, max_draws=50)
    assert src.random_calls == 50


# -- random walk -----------------------------------------------------------------------


def test_random_walk_stuck_at_start_says_so():
    start = SPACE.from_free(0b00101)
    oracle = FakeOracle(SPACE, {start})
    res = random_walk(oracle, 1.0, np.random.default_rng(0), start, samples=5)
    assert res.mask == start and res.trace.visited == [start]
    assert res.trace.notes and "stuck after 1 of 5" in res.trace.notes[0]
    # every neighbour was tried exactly once before giving up
    assert res.trace.validity_checks == SPACE.t - SPACE.m
    assert sorted(oracle.validity_asked) == sorted(SPACE.neighbours(start))


def test_random_walk_path_is_a_valid_walk(em_counter):
    for seed in range(40):
        valid = random_valid_set(100 + seed) | {SPACE.full}
        oracle = FakeOracle(SPACE, valid)
        res = random_walk(oracle, 0.5, np.random.default_rng(seed), SPACE.full, samples=12)
        path = res.trace.visited
        assert path[0] == SPACE.full
        assert all(m in valid for m in path)
        assert all(hamming1(a, b) for a, b in zip(path, path[1:]))
        assert res.mask in path
        assert (len(path) == 12) == (res.trace.notes == [])
        assert res.trace.n_em_calls == 1
    assert len(em_counter) == 40


def test_random_walk_on_the_full_lattice_takes_n_steps():
    oracle = FakeOracle(SPACE, ALL)
    res = random_walk(oracle, 0.5, np.random.default_rng(1), SPACE.v_mask, samples=30)
    assert len(res.trace.visited) == 30 and res.trace.notes == []


# -- dfs / bfs -------------------------------------------------------------------------


@pytest.mark.parametrize("search", [dfs, bfs])
@pytest.mark.parametrize("n", [1, 2, 10, 32])
def test_graph_search_visits_exactly_n_contexts_when_enough_exist(search, n, em_counter):
    oracle = FakeOracle(SPACE, ALL)
    res = search(oracle, 0.5, np.random.default_rng(n), SPACE.v_mask, samples=n)
    visited = res.trace.visited
    assert len(visited) == n == len(set(visited))
    assert visited[0] == SPACE.v_mask
    assert connected_in_order(visited)
    assert res.mask in visited
    assert res.trace.notes == []
    assert res.trace.n_em_calls == len(em_counter) <= n + 1


@pytest.mark.parametrize("search", [dfs, bfs])
def test_graph_search_exhausts_a_small_component_and_says_so(search):
    start = SPACE.v_mask
    a = start | (1 << SPACE.free_bits[0])
    b = a | (1 << SPACE.free_bits[3])
    far = SPACE.full  # valid but not connected to the component {start, a, b}
    oracle = FakeOracle(SPACE, {start, a, b, far})
    res = search(oracle, 0.5, np.random.default_rng(0), start, samples=10)
    assert set(res.trace.visited) == {start, a, b}
    assert res.trace.notes and "exhausted" in res.trace.notes[0] and "3 of 10" in res.trace.notes[0]
    assert far not in oracle.utility_asked


@pytest.mark.parametrize("name", ["dfs", "bfs"])
def test_graph_search_em_calls_never_exceed_n_plus_one_and_match_the_trace(name, em_counter):
    for seed in range(60):
        valid = random_valid_set(200 + seed, p=0.5 + 0.4 * (seed % 2))
        oracle = FakeOracle(SPACE, valid)
        start, _ = find_start(oracle)
        if start is None:
            continue
        n = 1 + seed % 12
        before = len(em_counter)
        res = run_search(name, oracle, 0.3, np.random.default_rng(seed), start=start, samples=n, descents=0)
        made = len(em_counter) - before
        assert made == res.trace.n_em_calls <= n + 1
        assert [c.candidates for c in res.trace.em_calls] == em_counter[before:]
        assert res.trace.em_calls[-1].step == "final"
        assert set(res.trace.visited) <= valid and res.mask in res.trace.visited
        assert connected_in_order(res.trace.visited)
        # utilities are only read for valid contexts (the oracle asserts it) that entered an EM
        assert set(oracle.utility_asked) <= valid


def test_bfs_expands_by_the_exponential_mechanism():
    # From V's cell with every context valid, the first expansion has only the start; the
    # second chooses among its t − m neighbours by utility. With ε1 = ∞ it takes the best.
    util = {m: 0.0 for m in ALL}
    best = SPACE.v_mask | (1 << SPACE.free_bits[2])
    util[best] = 5.0
    oracle = FakeOracle(SPACE, ALL, util)
    res = bfs(oracle, math.inf, np.random.default_rng(0), SPACE.v_mask, samples=2)
    assert res.trace.visited == [SPACE.v_mask, best]
    assert [c.candidates for c in res.trace.em_calls] == [1, SPACE.t - SPACE.m, 2]


def test_dfs_pushes_by_the_exponential_mechanism():
    util = {m: float(m.bit_count()) for m in ALL}
    oracle = FakeOracle(SPACE, ALL, util)
    res = dfs(oracle, math.inf, np.random.default_rng(0), SPACE.v_mask, samples=SPACE.t - SPACE.m + 1)
    # with ε1 = ∞ and utility = weight, every push adds one free bit: a chain up to full
    assert res.trace.visited[-1] == SPACE.full
    assert [m.bit_count() for m in res.trace.visited] == list(range(SPACE.m, SPACE.t + 1))
    assert res.mask == SPACE.full


def test_seeded_searches_are_reproducible():
    valid = random_valid_set(7) | {SPACE.full}
    for name in ("direct", "uniform", "random-walk", "dfs", "bfs"):
        a = [run_search(name, FakeOracle(SPACE, valid), 0.5, np.random.default_rng(s), start=SPACE.full, samples=6).mask for s in range(20)]
        b = [run_search(name, FakeOracle(SPACE, valid), 0.5, np.random.default_rng(s), start=SPACE.full, samples=6).mask for s in range(20)]
        assert a == b


def test_run_search_guards():
    oracle = FakeOracle(SPACE, ALL)
    with pytest.raises(UserError):
        run_search("astar", oracle, 0.5, np.random.default_rng(0), start=SPACE.full)
    for name in ("random-walk", "dfs", "bfs"):
        with pytest.raises(InternalError):
            run_search(name, oracle, 0.5, np.random.default_rng(0), start=None)
        with pytest.raises(InternalError):
            run_search(name, oracle, 0.5, np.random.default_rng(0), start=0)


# -- the start search's own tests: tests/core/test_start.py -------------------------


def test_bfs_descents_seed_the_frontier_by_validity_only():
    from pcor_sql.core.searches import bfs
    from pcor_sql.core.start import random_descents

    for seed in range(40):
        valid = random_valid_set(500 + seed, p=0.3)
        oracle = FakeOracle(SPACE, valid)
        start, _ = find_start(oracle)
        if start is None:
            continue
        roots = random_descents(oracle, np.random.default_rng(seed), 6)
        assert set(roots) <= valid and not oracle.utility_asked  # descents read validity only
        # A descent stops at the first valid context on its way down from the full context.
        if SPACE.full in valid:
            assert roots == [SPACE.full]
        n = 1 + seed % 10
        res = bfs(FakeOracle(SPACE, valid), 0.3, np.random.default_rng(seed), start, samples=n, descents=6)
        assert res.trace.n_em_calls <= n + 1
        assert set(res.trace.visited) <= valid and res.mask in res.trace.visited
        # With the same coins, the frontier's first EM sees the start and the distinct roots.
        first = res.trace.em_calls[0].candidates
        assert first == len({start, *random_descents(FakeOracle(SPACE, valid), np.random.default_rng(seed), 6)})


# -- explore ----------------------------------------------------------------------------


def test_explore_reads_validity_only_until_its_one_em(em_counter):
    for seed in range(40):
        valid = random_valid_set(600 + seed, p=0.2 + 0.6 * (seed % 3) / 2)
        if not valid:
            continue
        # Two oracles with the same COE and unrelated utilities: same coins, same collection.
        a = FakeOracle(SPACE, valid, {m: float(seed * m % 13) for m in ALL})
        b = FakeOracle(SPACE, valid, {m: -float(m) for m in ALL})
        n, cap = 1 + seed % 9, 8 + seed % 30
        before = len(em_counter)
        try:
            ra = explore(a, 0.4, np.random.default_rng(seed), samples=n, max_checks=cap)
        except NoValidContext:  # no valid context within the cap: the same on b, and no EM
            with pytest.raises(NoValidContext):
                explore(b, 0.4, np.random.default_rng(seed), samples=n, max_checks=cap)
            assert not a.utility_asked and not b.utility_asked and len(em_counter) == before
            continue
        rb = explore(b, 0.4, np.random.default_rng(seed), samples=n, max_checks=cap)
        assert ra.trace.visited == rb.trace.visited
        assert set(ra.trace.visited) <= valid and ra.mask in ra.trace.visited
        assert len(ra.trace.visited) <= n and ra.trace.validity_checks <= cap
        # utilities are read once per collected context, for the final EM, and nothing else
        assert set(a.utility_asked) == set(ra.trace.visited) and all(c == 1 for c in a.utility_asked.values())
        assert ra.trace.n_em_calls == 1 and [c.step for c in ra.trace.em_calls] == ["final"]
        assert em_counter[before:] == [len(ra.trace.visited)] * 2
        assert all(c == 1 for c in a.validity_asked.values())  # no context is verified twice


def test_explore_stops_at_its_caps_and_says_so():
    oracle = FakeOracle(SPACE, ALL)
    res = explore(oracle, 0.5, np.random.default_rng(0), samples=4, max_checks=1000)
    assert len(res.trace.visited) == 4 and res.trace.notes == []
    # everything valid: the full context first, then contexts one value smaller
    assert res.trace.visited[0] == SPACE.full
    assert all(m.bit_count() == SPACE.t - 1 for m in res.trace.visited[1:])
    capped = explore(FakeOracle(SPACE, {SPACE.v_mask}), 0.5, np.random.default_rng(0), max_checks=7)
    assert capped.trace.validity_checks == 7 and "cap of 7" in capped.trace.notes[0]
    with pytest.raises(NoValidContext):
        explore(FakeOracle(SPACE, {SPACE.v_mask}), 0.5, np.random.default_rng(0), max_checks=3)
    with pytest.raises(NoValidContext):
        explore(FakeOracle(SPACE, set()), 0.5, np.random.default_rng(0))


def test_explore_collects_all_of_coe_when_its_budget_covers_the_lattice():
    for seed in range(30):
        valid = random_valid_set(700 + seed, p=0.1 + 0.8 * seed / 30)
        if not valid:
            continue
        oracle = FakeOracle(SPACE, valid)
        res = explore(oracle, 0.5, np.random.default_rng(seed), samples=len(ALL), max_checks=len(ALL))
        assert set(res.trace.visited) == valid and res.trace.validity_checks <= len(ALL)


@pytest.mark.slow
def test_explore_output_law_equals_directs_when_it_sees_every_valid_context():
    valid = sorted(random_valid_set(9, p=0.5))
    util = {m: float(m.bit_count()) + (m % 5) for m in ALL}
    runs = 3_000
    exp_counts = Counter(
        explore(FakeOracle(SPACE, valid, util), 0.4, np.random.default_rng(s), samples=64, max_checks=64).mask
        for s in range(runs)
    )
    law = em_probabilities([util[m] for m in valid], 0.4)
    observed = np.array([exp_counts[m] for m in valid], dtype=float)
    assert observed.sum() == runs
    assert stats.chisquare(observed, law * runs).pvalue >= P_MIN
    # negative control: the same draws reject a law with a 1.5× larger ε1
    assert stats.chisquare(observed, em_probabilities([util[m] for m in valid], 0.6) * runs).pvalue < P_MIN


@pytest.mark.slow
def test_explore_output_law_is_the_em_over_its_collection():
    # A cap below the lattice: S is random (a function of COE and the coins); given S the
    # release is EM_ε1 over S. Replaying the collection with the same coins gives S per seed,
    # so the expected law Σ_s Pr[s]·EM_s is known exactly and the releases must follow it.
    from pcor_sql.core.exploration import collect

    valid = sorted(random_valid_set(10, p=0.5) - {SPACE.full})  # without the top: S varies with the coins
    util = {m: float(m.bit_count()) * 2 + (m % 3) for m in ALL}
    runs, expected = 3_000, Counter()
    counts = Counter()
    for s in range(runs):
        coll = list(collect(FakeOracle(SPACE, valid, util), np.random.default_rng(s), samples=5, max_checks=16).valid)
        if not coll:  # nothing valid within the cap: no release
            with pytest.raises(NoValidContext):
                explore(FakeOracle(SPACE, valid, util), 0.3, np.random.default_rng(s), samples=5, max_checks=16)
            continue
        res = explore(FakeOracle(SPACE, valid, util), 0.3, np.random.default_rng(s), samples=5, max_checks=16)
        counts[res.mask] += 1
        assert coll == res.trace.visited
        for m, p in zip(coll, em_probabilities([util[m] for m in coll], 0.3)):
            expected[m] += p
    support = sorted(expected)
    assert set(counts) <= set(support) and len(support) >= 8
    assert sum(counts.values()) == round(sum(expected.values())) > runs // 2
    assert stats.chisquare([counts[m] for m in support], [expected[m] for m in support]).pvalue >= P_MIN
