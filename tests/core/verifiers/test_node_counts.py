"""A node's neighbours checked from the node (`core.verifiers.node_counts`, through
`engine.lof_checks._WindowWalk.many`): the reference's verdicts and sizes on the births shape's
tied integer metric, for nodes from the full context down to a few values, with the walk's
fallback (WALK) reached; and `lof_checks.node_of` recognising a node's neighbours only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers import node_counts
from pcor_sql.core.verifiers.node_counts import WALK, NodeSlabs, lof_from_slabs, lof_node_many, slab_counts
from pcor_sql.core.verifiers.walk_batches import words_of
from pcor_sql.engine import lof_checks
from pcor_sql.engine.compiled_checks import compiled_check
from tests.engine.test_wide_checks import births, reference  # noqa: F401 (the fixture)


def nodes(space, rng: np.random.Generator, count: int) -> list[int]:
    """Nodes as a BFS meets them: a descent from the full context (one value less a step), and
    random admissible contexts (small ones among them)."""
    out, mask = [], space.full
    while len(out) < count // 2:
        out.append(mask)
        removable = space.shrink_bits(mask)
        for b in rng.choice(removable, size=min(len(removable), 6), replace=False):
            mask &= ~(1 << int(b))
    while len(out) < count:
        out.append(space.random_admissible(rng))
    return out


@pytest.mark.parametrize("verifier", [Lof(), Lof(k=3, duplicates="plain")], ids=repr)
def test_a_nodes_neighbours_agree_with_the_reference(births, verifier, monkeypatch):  # noqa: F811
    summary, space = births
    from_node, walked = [], []

    def counting(original):
        def kernel(*args):
            original(*args)
            from_node.append(1)
            walked.append(int((args[-2] == WALK).sum()))  # codes
        return kernel

    monkeypatch.setattr(lof_checks, "lof_node_many", counting(lof_node_many))
    monkeypatch.setattr(lof_checks, "lof_from_slabs", counting(lof_from_slabs))
    monkeypatch.setattr(lof_checks, "_CELL_COST", 0)  # every batch of neighbours from its node
    monkeypatch.setattr(lof_checks, "_WINDOW_COST", 0)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    rng = np.random.default_rng(7)
    for v in (2.0, ordinary):
        check = compiled_check(summary, space, verifier, v)
        for node in nodes(space, rng, 8):
            masks = [m for m in space.neighbours(node) if space.is_admissible(m)]
            assert check.many(masks) == [reference(summary, space, verifier, v, m) for m in masks], (v, node)
    assert len(from_node) == 16
    if verifier.duplicates == "distinct":  # (the plain rule's tied v has k' copies: LOF 1, read no further)
        assert sum(walked) > 0  # some neighbours read past the window: checked through the walk


def test_the_walk_is_kept_where_the_node_pass_costs_more(births, monkeypatch):  # noqa: F811
    """Near V's cell a neighbour's slab is a few cells: the walk's moves cost less than a pass
    over every cell, and the batch walks (same answers)."""
    summary, space = births
    called = []
    monkeypatch.setattr(lof_checks, "lof_node_many", lambda *a: called.append(a))
    monkeypatch.setattr(lof_checks, "lof_from_slabs", lambda *a: called.append(a))
    check = compiled_check(summary, space, Lof(), 2.0)
    small = space.v_mask
    masks = [m for m in space.neighbours(small) if space.is_admissible(m)]
    assert check.many(masks) == [reference(summary, space, Lof(), 2.0, m) for m in masks]
    assert called == []


@settings(max_examples=200, deadline=None)
@given(parent=st.integers(0, (1 << 90) - 1), flips=st.lists(st.integers(0, 89), min_size=3, max_size=20, unique=True))
def test_node_of_finds_the_node_of_its_neighbours(parent, flips):
    masks = [parent ^ (1 << b) for b in flips]
    assert lof_checks.node_of(masks) == (parent, flips)


def test_node_of_two_masks_reads_either_node():
    parent, flips = lof_checks.node_of([0b0011, 0b0101])
    assert (parent, flips) in ((0b0001, [1, 2]), (0b0111, [2, 1]))


def test_node_of_refuses_what_is_not_one_nodes_neighbours():
    assert lof_checks.node_of([0b1]) is None  # one context: no node to read
    assert lof_checks.node_of([0b0011, 0b0101, 0b11000]) is None  # the third is 2 bits from either node
    assert lof_checks.node_of([0b0011, 0b0101, 0b0001]) is None  # the third is a node itself
    assert lof_checks.node_of([0b0001, 0b0001]) is None  # a context twice
    assert lof_checks.node_of([0b0000, 0b0111]) is None  # 3 bits apart


def test_a_window_too_wide_to_hold_per_neighbour_keeps_the_walk(births, monkeypatch):  # noqa: F811
    """The full context's neighbours go from the node — unless their slabs' window counts would
    pass the cap (`lof_checks._MAX_WINDOW`: flights' continuous metric holds ~70,000 window
    values), when the batch walks."""
    summary, space = births
    masks = [m for m in space.neighbours(space.full) if space.is_admissible(m)]
    for cap, from_node in ((lof_checks._MAX_WINDOW, True), (0, False)):
        called = []
        monkeypatch.setattr(lof_checks, "lof_node_many", lambda *a: called.append(a) or lof_node_many(*a))
        monkeypatch.setattr(lof_checks, "lof_from_slabs", lambda *a: called.append(a) or lof_from_slabs(*a))
        monkeypatch.setattr(lof_checks, "_MAX_WINDOW", cap)
        check = compiled_check(summary, space, Lof(), 2.0)
        got = check.many(masks)
        assert bool(called) == from_node
        assert len(got) == len(masks)


def bfs_nodes(space, rng: np.random.Generator, count: int) -> list[int]:
    """Nodes in the order a BFS could expand them: each an admissible context one to three bits
    from the last (the births release: the full context less one value, then less another),
    with an occasional jump far away."""
    out, mask = [space.full], space.full
    while len(out) < count:
        if rng.random() < 0.1:
            mask = space.random_admissible(rng)
        else:
            for _ in range(int(rng.integers(1, 4))):
                moves = [m for m in space.neighbours(mask) if space.is_admissible(m)]
                mask = moves[int(rng.integers(len(moves)))]
        out.append(mask)
    return out


def test_slabs_carried_from_node_to_node_equal_a_fresh_pass(births, monkeypatch):  # noqa: F811
    """`NodeSlabs.at` moved by a few bits (`toggle_slab`) holds exactly the counts that one pass
    over the cells at the node (`slab_counts`, every bit a flip) sums; a far move is a fresh pass."""
    summary, space = births
    check = compiled_check(summary, space, Lof(), 2.0)
    toggled, toggle = [], node_counts.toggle_slab
    monkeypatch.setattr(node_counts, "toggle_slab", lambda *a: toggled.append(a[0]) or toggle(*a))
    slabs = NodeSlabs(check.flat, space.m, space.t, check.index, check.rows_of, check.ent, check.wu.size)
    every, none = np.arange(space.t, dtype=np.int64), np.empty(0)
    for node in bfs_nodes(space, np.random.default_rng(3), 60):
        words = words_of(node, check.n_words)
        n_p, marg_n, marg_cnt, cnt_p, _, _ = slab_counts(words, every, check.flat, space.m, space.t, check.rows_of,
                                                         check.ent, check.wu.size, none, none, False)
        at = slabs.at(node, words)
        assert at.n_p == n_p
        assert (at.cnt_p == cnt_p).all() and (at.slab_n == marg_n).all() and (at.slab_cnt == marg_cnt).all()
        assert (at.words == words).all()
    assert len(toggled) > 50  # most moves carried, not passed afresh


@pytest.mark.parametrize("verifier", [Lof(), Lof(k=3, duplicates="plain")], ids=repr)
def test_neighbours_of_nodes_in_bfs_order_agree_with_the_reference(births, verifier, monkeypatch):  # noqa: F811
    """Thousands of neighbours, of nodes met as a BFS meets them (the slabs carried from node to
    node), verdict and N as the reference's, on the tied metric, V planted low and ordinary."""
    summary, space = births
    carried = []
    monkeypatch.setattr(lof_checks, "lof_from_slabs", lambda *a: carried.append(1) or lof_from_slabs(*a))
    monkeypatch.setattr(lof_checks, "_CELL_COST", 0)  # every batch of neighbours from its node
    monkeypatch.setattr(lof_checks, "_WINDOW_COST", 0)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    rng = np.random.default_rng(17)
    asked = 0
    for v in (2.0, ordinary):
        check = compiled_check(summary, space, verifier, v)
        for node in bfs_nodes(space, rng, 30):
            masks = [m for m in space.neighbours(node) if space.is_admissible(m)]
            assert check.many(masks) == [reference(summary, space, verifier, v, m) for m in masks], (v, node)
            asked += len(masks)
    assert asked > 2000 and len(carried) == 60
