"""The compiled Grubbs, z-score and histogram checks give the reference's verdicts and sizes.

The reference is `verifier.check` on the summary's `SummaryPopulation` (itself held to
`ArrayPopulation` by test_summary.py). Compared: random contexts of tables with and without
ties, every context several seeded BFS releases asked about, and (hypothesis) tiny, constant
and tie-heavy populations built cell by cell.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.core.randomness import make_source
from pcor_sql.core.searches import bfs
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.run_sorting import sorted_runs
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import CellSummary, _summary, build_summary, record_cell
from pcor_sql.errors import UserError
from tests.engine.test_summary import make_table

V_VALUES = (900_000.0, 20_000.0, 250_000.0)  # planted in the record's cell (`salaries`)
VERIFIERS = (Grubbs(), Grubbs(alpha=0.2), ZScore(), ZScore(z=1.5), Histogram(), Histogram(rel=0.05), Histogram(rel=0.3))


def reference(summary: CellSummary, space: ContextSpace, verifier, v: float, mask: int) -> tuple[bool, int]:
    pop = summary.population(summary.member(space, mask), v)
    return bool(verifier.check(pop)), int(pop.n)


def agree(summary, space, verifier, v, masks) -> list[bool]:
    check = compiled_check(summary, space, verifier, v)
    assert check is not None
    verdicts = []
    for mask in masks:
        got = check(mask)
        assert got == reference(summary, space, verifier, v, mask), (verifier, v, bin(mask))
        verdicts.append(got[0])
    return verdicts


@pytest.fixture(scope="module", params=[True, False], ids=["ties", "distinct"])
def salaries(request):
    con = duckdb.connect()
    make_table(con, n=3000, seed=3, ties=request.param)
    # V (the record whose value is checked) is in every population: plant a few in its cell.
    con.execute("INSERT INTO s VALUES (-1, 'prof', '2020', 'e1', 900000.0), (-2, 'prof', '2020', 'e1', 20000.0), "
                "(-3, 'prof', '2020', 'e1', 250000.0)")
    schema = resolve_schema(con, "s", '"salary"', by=["job", "year", "emp"])
    summary = build_summary(con, schema, with_values=True)
    space = ContextSpace(schema.attributes, record_cell(schema, {"job": "prof", "year": "2020", "emp": "e1"}))
    yield con, summary, space
    con.close()


@pytest.mark.parametrize("verifier", VERIFIERS, ids=repr)
def test_random_contexts_agree_with_the_reference(salaries, verifier):
    _, summary, space = salaries
    rng = np.random.default_rng(7)
    masks = [space.random_admissible(rng) for _ in range(150)]
    verdicts = []
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])  # V's cell
    for v in V_VALUES + tuple(summary.runs().cell_values(own)[::5].tolist()):
        verdicts += agree(summary, space, verifier, v, masks)
    assert any(verdicts) or isinstance(verifier, Grubbs) and verifier.alpha < 0.1  # both verdicts occur
    assert not all(verdicts)


@pytest.mark.parametrize("verifier", [Grubbs(), ZScore(z=2.5), Histogram(rel=0.02)], ids=repr)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_context_of_seeded_bfs_releases_agrees(salaries, verifier, seed):
    """The evaluator takes the compiled path; each context a start search and BFS asked about
    is re-decided by the reference."""
    con, summary, space = salaries
    for v in V_VALUES:
        ev = Evaluator(con, summary, space, v, verifier)
        assert ev._compiled is ...  # built on the first check
        start, _ = ev.find_start(400)
        if start is not None:
            bfs(ev, 0.5, make_source(seed)[0], start, samples=30)
        assert callable(ev._compiled)
        for mask, verdict in ev._valid.items():
            assert (verdict, ev._count[mask]) == reference(summary, space, verifier, v, mask)


def test_the_plain_path_and_other_verifiers_are_not_compiled(salaries):
    con, summary, space = salaries

    class Louder(ZScore):
        pass

    assert compiled_check(summary, space, Louder(), 1.0) is None
    assert Evaluator(con, summary, space, 1.0, Grubbs(), plain=True)._compiled is None


def summary_of(cells: list[list[float]], sizes: tuple[int, ...]) -> tuple[CellSummary, ContextSpace]:
    """A summary built the engine's way (`sorted_runs`, `_summary`) from each cell's values;
    cell c has domain indices np.unravel_index(c, sizes); every cell is present."""
    attributes = [Attribute(f"a{i}", tuple(f"v{j}" for j in range(s))) for i, s in enumerate(sizes)]
    lengths = np.array([len(c) for c in cells], dtype=np.int64)
    values = np.array([x for c in cells for x in c], dtype=np.float64)
    keep = np.flatnonzero(lengths > 0)
    runs, (count, mean, var, lo, hi) = sorted_runs(values, lengths, keep)
    coords = np.stack(np.unravel_index(keep, sizes), axis=1).astype(np.int64)
    summary = _summary(None, coords, count, mean, var, lo, hi, 0.0, None, runs)
    return summary, ContextSpace(attributes, coords[0].tolist())


cell_values = st.lists(st.sampled_from([0.0, 1.0, 1.0, 2.0, 5.0, 1e6, -3.5]), min_size=0, max_size=4)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(cell_values, min_size=6, max_size=6).filter(lambda cs: len(cs[0]) > 0),
       st.integers(0, 3), st.integers(0, 2**5 - 1))
def test_tiny_constant_and_tie_heavy_populations_agree(cells, which, free):
    """N = 1..3, constant populations and heavy ties: where thresholds and special cases live."""
    summary, space = summary_of(cells, (3, 2))
    v = cells[0][which % len(cells[0])]  # V is in its own cell, hence in every context
    mask = space.from_free(free % space.n_admissible)
    for verifier in (Grubbs(), Grubbs(alpha=0.5), ZScore(z=0.5), ZScore(), Histogram(rel=0.5), Histogram(rel=1.0)):
        got = compiled_check(summary, space, verifier, v)(mask)
        assert got == reference(summary, space, verifier, v, mask)


def test_wide_contexts_use_the_word_path():
    """A space of more than 63 bits passes contexts as uint64 words: same verdicts."""
    rng = np.random.default_rng(5)
    sizes = (40, 30)
    cells = [list(np.round(rng.normal(100, 10, rng.integers(0, 4)), 1)) for _ in range(40 * 30)]
    cells[0] = [100.0, 400.0]
    summary, space = summary_of(cells, sizes)
    assert space.t > 64
    # V's own cell is a small mask of a wide space: cells with bits ≥ 64 must stay outside it.
    masks = [space.random_admissible(rng) for _ in range(60)] + [space.full, space.v_mask]
    assert any(m >= 1 << 63 for m in masks)
    for verifier in (Grubbs(), ZScore(z=2.0), Histogram(rel=0.1)):
        verdicts = agree(summary, space, verifier, 400.0, masks)
        assert any(verdicts)


def test_a_histogram_range_too_narrow_for_its_bins_raises_as_the_reference_does():
    lo = 1.0
    hi = np.nextafter(lo, 2.0)
    summary, space = summary_of([[lo] * 50 + [hi] * 50], (1,))
    with pytest.raises(UserError, match="cannot split the range"):
        reference(summary, space, Histogram(), lo, space.full)
    with pytest.raises(UserError, match="cannot split the range"):
        compiled_check(summary, space, Histogram(), lo, )(space.full)
