"""A node's neighbours checked by the histogram verifier from the node
(`core.verifiers.histogram_node`, through `engine.compiled_checks._histogram_walked`'s batch):
the reference's verdicts and sizes on the births shape's tied integer metric, for nodes from the
full context down to a few values and random ones, with the walk's fallback (WALK) reached."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.verifiers import histogram_node
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.node_counts import WALK
from pcor_sql.engine import lof_checks
from pcor_sql.engine.compiled_checks import compiled_check
from tests.core.verifiers.test_node_counts import nodes
from tests.engine.test_wide_checks import births, reference  # noqa: F401 (the fixture)


@pytest.mark.parametrize("verifier", [Histogram(), Histogram(rel=0.05)], ids=repr)
def test_a_nodes_neighbours_agree_with_the_reference(births, verifier, monkeypatch):  # noqa: F811
    summary, space = births
    from_node, walked, verdicts = [], [], set()
    original = histogram_node.histogram_node_many

    def counting(*args):
        original(*args)
        from_node.append(1)
        walked.append(int((args[-2] == WALK).sum()))  # codes

    monkeypatch.setattr(histogram_node, "histogram_node_many", counting)
    monkeypatch.setattr(lof_checks, "_CELL_COST", 0)  # every batch of neighbours from its node
    monkeypatch.setattr(lof_checks, "_WINDOW_COST", 0)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    rng = np.random.default_rng(7)
    for v in (2.0, ordinary):
        check = compiled_check(summary, space, verifier, v)
        for node in [*nodes(space, rng, 8), space.v_mask]:
            masks = [m for m in space.neighbours(node) if space.is_admissible(m)]
            want = [reference(summary, space, verifier, v, m) for m in masks]
            assert check.many(masks) == want, (v, node)
            verdicts.update(w for w, _ in want)
    assert len(from_node) == 18
    assert sum(walked) > 0  # some neighbours' bins are wider than the window: checked through the walk
    assert verdicts == {True, False}  # both verdicts met


def test_the_walk_is_kept_where_the_node_pass_costs_more(births, monkeypatch):  # noqa: F811
    """Near V's cell a neighbour's slab is a few cells: the batch walks (same answers)."""
    summary, space = births
    called = []
    monkeypatch.setattr(histogram_node, "histogram_node_many", lambda *a: called.append(a))
    check = compiled_check(summary, space, Histogram(), 2.0)
    masks = [m for m in space.neighbours(space.v_mask) if space.is_admissible(m)]
    assert check.many(masks) == [reference(summary, space, Histogram(), 2.0, m) for m in masks]
    assert called == []
