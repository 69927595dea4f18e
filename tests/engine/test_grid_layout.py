"""The window walks' cell order (`engine.grid_layout`) and window (`engine.lof_checks.lof_window`):
a relabelling in grid order, the whole table for a tied metric, and — on a metric without ties,
whose walks read past a window around v into the member runs — the reference's verdicts and
sizes on walked contexts (the tied case: `test_wide_checks`)."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.grid_layout import grid_layout, grid_order
from pcor_sql.engine.lof_checks import lof_window
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary, record_cell
from tests.engine.test_wide_checks import SIZES, reference, walks, wide_shape


@pytest.fixture(scope="module")
def untied():
    """The wide shape of `test_wide_checks` (9,600 cells) with a metric without ties."""
    con = duckdb.connect()
    yield wide_shape(con, "CASE WHEN id = 0 THEN 3.5 ELSE ((h // {stride}) % 1000003) / 1000.0"
                          " + ((h // 7) % {size}) / 9.0 END")
    con.close()


def test_the_layout_is_the_cells_in_grid_order_with_their_runs(untied):
    summary, _ = untied
    layout = grid_layout(summary)
    assert grid_layout(summary) is layout  # kept with the runs
    coords = layout.coords
    m = coords.shape[1]
    keys = sum(coords[:, i] * math.prod(SIZES[:i]) for i in range(m))  # attribute 0 fastest
    assert (np.diff(keys) > 0).all()
    assert (coords == summary.coords[layout.perm]).all()
    runs = summary.runs()
    for w in (0, 1, len(layout.perm) // 2, len(layout.perm) - 1):
        assert (layout.runs.cell_values(w) == runs.cell_values(int(layout.perm[w]))).all()
    assert (layout.vmin == summary.vmin[layout.perm]).all() and (layout.vmax == summary.vmax[layout.perm]).all()


@pytest.mark.parametrize("sizes, n", [((51, 20, 12, 7), 85_680), ((7, 5, 3), 60), ((1000, 1000, 1000), 500),
                                      ((2**21, 2**21, 2**21, 3), 300), ((4,), 3)])
def test_the_grid_order_is_lexsorts_on_full_sparse_and_huge_grids(sizes, n):
    rng = np.random.default_rng(len(sizes) * n)
    if math.prod(sizes) == n:  # the full grid (births' shape)
        flat = rng.permutation(n)
        coords = np.stack([(flat // math.prod(sizes[:i])) % s for i, s in enumerate(sizes)], axis=1)
    else:  # distinct random cells of a sparse grid, or of one whose size overflows an int64
        coords = np.unique(np.stack([rng.integers(0, s, n) for s in sizes], axis=1), axis=0)
    coords = coords.astype(np.int64)
    coords = coords[rng.permutation(coords.shape[0])]  # the summary's order is not the grid's
    assert (grid_order(coords) == np.lexsort(coords.T)).all()


def test_the_window_is_narrow_and_widens_to_the_whole_table():
    tied = np.sort(np.repeat(np.arange(1_000.0), 60))
    a, b = lof_window(tied, tied.size, 2.0, 20)
    assert a == -math.inf and 2.0 < b < 999.0  # 176 distinct values above v, not the table
    widths = [lof_window(tied, tied.size, 2.0, 20, widened)[1] for widened in range(4)]
    assert widths == sorted(widths) and widths[0] < widths[1] and widths[-1] == math.inf
    untied = np.sort(np.random.default_rng(1).random(32_768))
    a, b = lof_window(untied, untied.size, 0.5, 20)
    assert -math.inf < a < 0.5 < b < math.inf


@pytest.mark.parametrize("verifier", [Lof(k=5), Lof(k=3, duplicates="plain"), Histogram(rel=0.05)], ids=repr)
def test_walked_contexts_of_an_untied_metric_agree_with_the_reference(untied, verifier):
    summary, space = untied
    assert np.unique(summary.runs().sample()).size > 8192  # the window is not the table
    masks = walks(space, np.random.default_rng(21), 600)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])  # V's cell
    run = summary.runs().cell_values(own)
    verdicts = []
    for v in (3.5, float(run[run.size // 2])):  # planted; an ordinary value of V's cell
        check = compiled_check(summary, space, verifier, v)
        for mask in masks:
            got = check(mask)
            assert got == reference(summary, space, verifier, v, mask), (verifier, v)
            verdicts.append(got[0])
    assert any(verdicts) and not all(verdicts)
