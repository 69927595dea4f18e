"""A large context's single check without a walk (`core.verifiers.value_order`, through
`engine.lof_checks._WindowWalk` and the histogram's walked check): N off the grid's sums, the
counts near v off the window's entries by value — the reference's verdicts and sizes on the
births shape's tied integer metric, for contexts from the full one down to a quarter of the
grid, with the walk's fallback (WALK) reached."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.jit import context_words
from pcor_sql.core.verifiers import value_order
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.node_counts import WALK
from pcor_sql.engine import lof_checks
from pcor_sql.engine.compiled_checks import compiled_check
from tests.engine.test_wide_checks import births, reference  # noqa: F401 (the fixture)


def large(space, rng: np.random.Generator, count: int) -> list[int]:
    """Contexts from the full one down to about a quarter of the grid (either side of
    DIRECT_SHARE), each a random number of values short of full."""
    out = []
    for _ in range(count):
        mask = space.full
        for _ in range(int(rng.integers(0, 40))):
            removable = space.shrink_bits(mask)
            if not removable:
                break
            mask &= ~(1 << int(removable[int(rng.integers(len(removable)))]))
        out.append(mask)
    return out


def test_context_rows_is_the_sum_over_the_member_cells(births):  # noqa: F811
    summary, space = births
    layout = compiled_check(summary, space, Lof(), 2.0)
    rng = np.random.default_rng(3)
    answered = 0
    for mask in large(space, rng, 150) + [space.random_admissible(rng) for _ in range(50)]:
        x, words = context_words(mask, layout.n_words)
        inside = value_order._inside(x, words, space.t)
        n = value_order.context_rows(inside, *layout.grid, 0.0, 1 << 30)
        assert n == int(summary.count[summary.member(space, mask)].sum())
        answered += 1
    assert answered == 200


def test_both_ways_of_counting_a_window_value_agree_with_the_member_cells(births):  # noqa: F811
    """Each window value's rows in the context, read off its entries in member cells and off the
    table's total less the complement's (each cell counted at its first missing attribute)."""
    summary, space = births
    walk = compiled_check(summary, space, Lof(), 2.0)
    runs, wu, vs = walk.runs, walk.wu, walk.by_value
    member_of = np.asarray(walk.flat[:, : space.m])
    rng = np.random.default_rng(4)
    modes = set()
    for mask in large(space, rng, 40) + [space.random_admissible(rng) for _ in range(20)]:
        x, words = context_words(mask, walk.n_words)
        inside = value_order._inside(x, words, space.t)
        missing, cost = value_order._missing(inside, vs[7], walk.grid[0])
        modes.add(bool(cost < vs[1].shape[0]))
        cells = np.flatnonzero(inside[member_of].all(axis=1))
        rows = np.concatenate([runs.cell_values(int(c)) for c in cells])
        expected = np.searchsorted(np.sort(rows), wu, side="right") - np.searchsorted(np.sort(rows), wu, side="left")
        for complement in (False, True):
            got = [value_order._value_rows(d, inside, vs, missing, complement) for d in range(wu.size)]
            assert got == expected.tolist(), (mask, complement)
    assert modes == {False, True}  # either way the cheaper for some context


@pytest.mark.parametrize("verifier", [Lof(), Lof(k=5), Lof(k=3, duplicates="plain"), Histogram(),
                                      Histogram(rel=0.05)], ids=repr)
def test_large_contexts_checked_directly_agree_with_the_reference(births, verifier, monkeypatch):  # noqa: F811
    summary, space = births
    answers = []
    for module, name in ((lof_checks, "lof_direct"), (value_order, "histogram_direct")):  # where each is called from
        original = getattr(module, name)

        def counting(*args, original=original):
            out = original(*args)
            answers.append(out[-1] if len(out) == 3 else out[0])
            return out

        monkeypatch.setattr(module, name, counting)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    rng = np.random.default_rng(9)
    masks = large(space, rng, 80) + [space.random_admissible(rng) for _ in range(20)]
    for v in (2.0, ordinary):
        check = compiled_check(summary, space, verifier, v)
        for mask in masks:
            assert check(mask) == reference(summary, space, verifier, v, mask), (verifier, v, mask)
    assert sum(a != WALK for a in answers) > 20  # checked directly
    # and some through the walk: small (`share_gate`), or past the window or the budget (WALK)
    assert sum(a != WALK for a in answers) < 2 * len(masks)
