"""A node's neighbours checked by Grubbs and z-score from the node (`core.verifiers.moment_node`,
through `engine.compiled_checks`' batches): the reference's verdicts and sizes on the births
shape's tied integer metric, for nodes from the full context down to a few values and random
ones; the bound's fallback to the reference kernel reached (a z at a neighbour's own statistic),
and Grubbs' G between two tabulated critical values compared with G_crit(α, N) itself."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.verifiers import grubbs as grubbs_module
from pcor_sql.core.verifiers import moment_kernel, moment_node, moment_state
from pcor_sql.core.verifiers.base import studentized_distance
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine import lof_checks
from pcor_sql.engine.compiled_checks import compiled_check
from tests.core.verifiers.test_node_counts import nodes
from tests.engine.test_wide_checks import births, reference  # noqa: F401 (the fixture)


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = moment_node.moment_node_many

    def counting(*args):
        original(*args)
        calls.append(1)

    monkeypatch.setattr(moment_node, "moment_node_many", counting)
    return calls


def _pass(monkeypatch, how: str) -> None:
    """From the node off the grid (the births shape's default), from the node by one pass over
    the cells (no rows in grid order, `node_pays` forced), or by walk."""
    if how != "grid":
        monkeypatch.setattr(moment_state, "_GRID_SHARE", 0)
        monkeypatch.setattr(lof_checks, "_CELL_COST", 0 if how == "cells" else 1e9)


def _node_masks(space, rng, count):
    for node in [*nodes(space, rng, count), space.v_mask]:
        yield node, [m for m in space.neighbours(node) if space.is_admissible(m)]


@pytest.mark.parametrize("how", ["grid", "cells"])
@pytest.mark.parametrize("verifier", [Grubbs(), Grubbs(alpha=0.3), ZScore(z=0.5), ZScore(z=1.2)], ids=repr)
def test_a_nodes_neighbours_agree_with_the_reference(births, verifier, how, monkeypatch):  # noqa: F811
    summary, space = births
    calls = _counting(monkeypatch)
    _pass(monkeypatch, how)  # every batch of neighbours from its node
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    rng = np.random.default_rng(11)
    verdicts: set[bool] = set()
    for v in (2.0, ordinary):
        check = compiled_check(summary, space, verifier, v)
        for node, masks in _node_masks(space, rng, 8):
            want = [reference(summary, space, verifier, v, m) for m in masks]
            assert check.many(masks) == want, (v, node)
            verdicts.update(w for w, _ in want)
        # The walk's state is where the node pass found it: a check after it agrees too.
        assert check(space.full) == reference(summary, space, verifier, v, space.full)
    assert len(calls) == 18
    assert verdicts == {True, False}


@pytest.mark.parametrize("how", ["grid", "cells"])
def test_a_statistic_too_near_the_threshold_is_summed_by_the_reference_kernel(births, how, monkeypatch):  # noqa: F811
    """z at one neighbour's own G: its bound cannot decide, the reference kernel does (G > z is
    false), and its siblings keep their verdicts."""
    summary, space = births
    calls = _counting(monkeypatch)
    _pass(monkeypatch, how)
    rng = np.random.default_rng(3)
    node = nodes(space, rng, 4)[2]
    masks = [m for m in space.neighbours(node) if space.is_admissible(m)]
    z = studentized_distance(summary.population(summary.member(space, masks[3]), 2.0), 2)
    check = compiled_check(summary, space, ZScore(z=z), 2.0)
    assert check.many(masks) == [reference(summary, space, ZScore(z=z), 2.0, m) for m in masks]
    assert check.many(masks)[3][0] is False and len(calls) == 2


@pytest.mark.parametrize("how", ["grid", "cells", "walk"])
def test_g_between_tabulated_critical_values_is_compared_with_g_crit_itself(births, how, monkeypatch):  # noqa: F811
    """A coarse table (nothing between N = 1,024 and the table's end) leaves many populations
    undecided (v = 2,000 rows: G of 3-7 where G_crit is 3.3-4.6): each is decided by its G against
    G_crit(α, N), as `Grubbs.check` does, by node and by walk."""
    summary, space = births
    coarse = moment_kernel.grubbs_table.__wrapped__

    def table(alpha: float, n_max: int) -> moment_kernel.GrubbsTable:
        fine = coarse(alpha, n_max)
        keep = fine.n <= moment_kernel.EXACT_UP_TO
        keep[-1] = True
        return moment_kernel.GrubbsTable(fine.n[keep], fine.crit[keep])

    monkeypatch.setattr(moment_kernel, "grubbs_table", table)
    asked: list[int] = []
    counting = [False]
    original = grubbs_module.grubbs_critical_one

    def critical(alpha: float, n: int) -> float:
        if counting[0]:
            asked.append(n)
        return original(alpha, n)

    monkeypatch.setattr(grubbs_module, "grubbs_critical_one", critical)
    rng = np.random.default_rng(5)
    calls = _counting(monkeypatch)
    _pass(monkeypatch, how)
    check = compiled_check(summary, space, Grubbs(alpha=0.3), 2000.0)
    for node, masks in _node_masks(space, rng, 6):
        want = [reference(summary, space, Grubbs(alpha=0.3), 2000.0, m) for m in masks]
        counting[0] = True
        got = check.many(masks)
        counting[0] = False
        assert got == want, node
    assert (len(calls) == 0) == (how == "walk")
    assert len(asked) > 0 and max(asked) > moment_kernel.EXACT_UP_TO


@pytest.mark.parametrize("how", ["grid", "cells"])
@pytest.mark.parametrize("verifier", [Grubbs(alpha=0.3), ZScore(z=0.5)], ids=repr)
def test_single_checks_among_one_nodes_neighbours_are_answered_from_the_node(
        births, verifier, how, monkeypatch):  # noqa: F811
    """A node's neighbours asked one at a time (the start's sweep), with unrelated contexts and
    other nodes' neighbours between them: from the third on, read off one node pass; each
    answer the reference's, and the walk's state still that of the last context it walked."""
    summary, space = births
    calls = _counting(monkeypatch)
    _pass(monkeypatch, how)
    rng = np.random.default_rng(13)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    verdicts = set()
    for v in (2.0, float(np.median(summary.runs().cell_values(own)))):
        check = compiled_check(summary, space, verifier, v)
        for node, masks in _node_masks(space, rng, 6):
            order = [*masks[:2], space.random_admissible(rng), *masks]  # a jump after two siblings
            for mask in order:
                want = reference(summary, space, verifier, v, mask)
                assert check(mask) == want, (node, mask)
                verdicts.add(want[0])
    assert len(calls) == 14  # one pass a node (each met three siblings in a row)
    assert verdicts == {True, False}
