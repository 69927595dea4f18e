"""`core.neighbour_rows`: a wide context's neighbours and a descent's path as word rows, equal to
`ContextSpace.neighbours` / the path built bit by bit, with the same keys as `ContextSpace.key`."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.neighbour_rows import applies, neighbour_rows, path_rows
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.core.verifiers.walk_batches import context_matrix

spaces = st.lists(st.integers(1, 90), min_size=1, max_size=4).filter(lambda s: sum(s) > 60)


def _space(sizes: list[int], seed: int) -> ContextSpace:
    rng = np.random.default_rng(seed)
    attrs = [Attribute(f"a{i}", tuple(range(n))) for i, n in enumerate(sizes)]
    return ContextSpace(attrs, [int(rng.integers(0, n)) for n in sizes])


@settings(max_examples=120, deadline=None)
@given(spaces, st.integers(0, 2**32 - 1))
def test_neighbour_rows_are_the_neighbours_and_their_keys(sizes, seed):
    space = _space(sizes, seed)
    assert applies(space)
    mask = space.random_admissible(np.random.default_rng(seed))
    rows, keys = neighbour_rows(space, mask)
    expected = space.neighbours(mask)
    assert keys == [space.key(c) for c in expected]
    assert rows.dtype == np.uint64 and rows.flags.c_contiguous
    assert np.array_equal(rows, context_matrix(expected, (space.t + 63) // 64))


@settings(max_examples=120, deadline=None)
@given(spaces, st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_path_rows_clear_the_bits_one_after_the_other(sizes, seed, count):
    space = _space(sizes, seed)
    rng = np.random.default_rng(seed)
    removable = space.shrink_bits(space.full)
    removed = [int(b) for b in rng.permutation(removable)[:count]]
    if not removed:
        return
    rows, keys = path_rows(space, space.full, removed)
    path, mask = [], space.full
    for b in removed:
        mask &= ~(1 << b)
        path.append(mask)
    assert keys == [space.key(c) for c in path]
    assert np.array_equal(rows, context_matrix(path, (space.t + 63) // 64))


def test_narrow_and_ordinal_spaces_keep_the_plain_neighbours():
    narrow = ContextSpace([Attribute("a", tuple(range(30))), Attribute("b", tuple(range(20)))], [0, 0])
    binned = ContextSpace([Attribute("a", tuple(range(80))), Attribute.binned("x", [float("-inf"), 0, 1, float("inf")])],
                          [0, 1])
    assert not applies(narrow)  # keyed by the int itself
    assert not applies(binned)  # the moves depend on the context's runs
