"""Batched checks (`core.verifiers.walk_batches`, `Evaluator.valid_many`): the same verdicts and
sizes as one check after the other, and seeded searches that use them give the same contexts,
traces and leftover coins as the same searches asking one context at a time."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core import searches
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.evaluator import Evaluator
from tests.engine.test_wide_checks import reference, walks, wide  # noqa: F401 (the fixture)

VERIFIERS = [Grubbs(), ZScore(z=1.2), Histogram(rel=0.05), Lof(k=5)]


@pytest.mark.parametrize("verifier", VERIFIERS, ids=repr)
def test_a_batch_answers_as_one_check_after_the_other(wide, verifier):
    summary, space = wide
    masks = walks(space, np.random.default_rng(31), 400)
    check = compiled_check(summary, space, verifier, 60.0)
    assert hasattr(check, "many")  # a wide summary walks
    got, at, sizes = [], 0, (1, 7, 64, 3, 120)
    while at < len(masks):  # batches of several sizes, with single checks between them
        n = sizes[len(got) % len(sizes)]
        got += check.many(masks[at: at + n])
        at += n
        if at < len(masks):
            got.append(check(masks[at]))
            at += 1
    assert got == [reference(summary, space, verifier, 60.0, m) for m in masks]


class _OneByOne:
    """The same oracle without `valid_many`: the searches ask one context at a time."""

    def __init__(self, inner: Evaluator):
        self.inner, self.space = inner, inner.space

    def is_valid(self, mask: int) -> bool:
        return self.inner.is_valid(mask)

    def utility(self, mask: int) -> float:
        return self.inner.utility(mask)


@pytest.mark.parametrize("verifier", VERIFIERS, ids=repr)
@pytest.mark.parametrize("search", ["bfs", "dfs", "uniform"])
def test_seeded_searches_are_the_same_with_batches(wide, verifier, search):
    summary, space = wide
    runs = []
    for batched in (True, False):
        oracle = Evaluator(None, summary, space, 60.0, verifier)
        source = np.random.default_rng(5)
        asked = oracle if batched else _OneByOne(oracle)
        if search == "uniform":
            try:
                result = searches.uniform(asked, 0.5, source, samples=8, max_draws=300)
            except Exception as exc:  # noqa: BLE001 - no valid context: the same either way
                runs.append(repr(exc))
                continue
        else:
            run = searches.bfs if search == "bfs" else searches.dfs
            result = run(asked, 0.5, source, space.v_mask, samples=12)
        t = result.trace
        runs.append((result.mask, t.visited, t.validity_checks, [(c.step, c.candidates) for c in t.em_calls], t.notes,
                     source.random(4).tolist()))  # the coins left after the search
    assert runs[0] == runs[1]


@pytest.mark.parametrize("verifier", VERIFIERS, ids=repr)
def test_valid_keyed_from_rows_answers_as_valid_many(wide, verifier):
    from pcor_sql.core.neighbour_rows import neighbour_rows

    summary, space = wide
    node = walks(space, np.random.default_rng(8), 30)[-1]
    rows, keys = neighbour_rows(space, node)
    masks = space.neighbours(node)
    keyed = Evaluator(None, summary, space, 60.0, verifier)
    keyed.valid_many(masks[::3])  # some answered already: the rows of the others are checked
    got = keyed.valid_keyed(masks, keys, rows)
    assert got == Evaluator(None, summary, space, 60.0, verifier).valid_many(masks)
    assert [keyed.utility_keyed(m, k) for m, k in zip(masks, keys)] == [keyed.utility(m) for m in masks]
    fresh = Evaluator(None, summary, space, 60.0, verifier)
    assert fresh.utilities_keyed(masks, keys) == [fresh.utility(m) for m in masks]


@pytest.mark.parametrize("verifier", VERIFIERS, ids=repr)
def test_bfs_is_the_same_with_neighbour_rows_and_without(wide, verifier, monkeypatch):
    """bfs expands a node through `neighbour_rows` from `ROWS_FROM_BITS` bits on, else one
    neighbour at a time with its key: the same contexts, trace and leftover coins either way."""
    from pcor_sql.core import neighbour_rows

    summary, space = wide
    runs = []
    for width in (0, space.t + 1):  # rows, then the plain expansion
        monkeypatch.setattr(neighbour_rows, "ROWS_FROM_BITS", width)
        assert neighbour_rows.pays(space) == (width == 0)
        for seed in (5, 6):
            source = np.random.default_rng(seed)
            result = searches.bfs(Evaluator(None, summary, space, 60.0, verifier), 0.5, source, space.v_mask,
                                  samples=12, descents=2)
            t = result.trace
            runs.append((width == 0, seed, result.mask, t.visited, t.validity_checks,
                         [(c.step, c.candidates) for c in t.em_calls], t.notes, source.random(4).tolist()))
    assert [r[1:] for r in runs[:2]] == [r[1:] for r in runs[2:]]
