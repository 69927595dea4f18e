"""`core.frontier.Frontier`: the same members, order and utilities as the insertion-ordered dict
bfs kept before (key → (context, utility)), under any sequence of joins and removals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.frontier import Frontier

steps = st.lists(st.tuples(st.booleans(), st.integers(0, 300), st.floats(-1e6, 1e6)), max_size=400)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_frontier_is_the_insertion_ordered_dict(ops):
    frontier, reference = Frontier(), {}
    for join, key, utility in ops:
        if join:
            frontier.add(key, key * 7, utility)
            reference.setdefault(key, (key * 7, utility))
        elif key in reference:
            frontier.remove(key)
            del reference[key]
        assert len(frontier) == len(reference) and (key in frontier) == (key in reference)
        members, utilities = frontier.members()
        assert [members[i] for i in range(len(members))] == [c for c, _ in reference.values()]
        assert utilities.tolist() == [u for _, u in reference.values()]
    assert bool(frontier) == bool(reference)


def test_members_index_like_a_list():
    frontier = Frontier()
    for k in range(200):  # past the first buffer's 64: the arrays grow
        frontier.add(k, 1000 + k, float(k))
    frontier.remove(0)
    members, utilities = frontier.members()
    assert len(members) == 199 and members[0] == 1001 and members[np.int64(198)] == 1199
    assert utilities[0] == 1.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 120), max_size=70), max_size=8))
def test_add_many_is_add_one_after_the_other(batches):
    many, one = Frontier(), Frontier()
    for b, keys in enumerate(batches):
        masks, utilities = [k + 1000 for k in keys], [float(k * b) for k in keys]
        many.add_many(keys, masks, utilities)
        for k, m, u in zip(keys, masks, utilities):
            one.add(k, m, u)
        if keys and keys[0] in one:
            one.remove(keys[0])
            many.remove(keys[0])
    (a, ua), (b, ub) = many.members(), one.members()
    assert [a[i] for i in range(len(a))] == [b[i] for i in range(len(b))] and ua.tolist() == ub.tolist()
