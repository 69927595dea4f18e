"""`cell_moves.moved_cells` lists every cell a move takes out of or brings into a context: its
slices (grid present or not) and its cell lists, one to three values changed at a time."""

from __future__ import annotations

import numpy as np
import pytest

from pcor_sql.core.cell_moves import moved_cells
from pcor_sql.core.jit import cell_index, context_words, flat_bits, member_cells


@pytest.mark.parametrize("sizes", [(40, 3, 5), (7, 2, 3, 2), (100, 30)])
@pytest.mark.parametrize("dense", [True, False])
def test_a_move_lists_the_cells_that_leave_and_enter(sizes, dense, monkeypatch):
    if not dense:
        monkeypatch.setattr("pcor_sql.core.jit.DENSE_CELLS", 0)  # lists only
    rng = np.random.default_rng(len(sizes))
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(sizes))), sizes), axis=1)
    coords = grid[rng.random(len(grid)) < 0.7]  # some combinations have no rows
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    t = int(sum(sizes))
    n_words = (t + 63) // 64
    flat = flat_bits(coords, offsets, always=int(offsets[0] + coords[0, 0]))
    index = cell_index(coords, offsets, t)
    starts = 2 + len(sizes) + 1  # `cell_index`'s layout: header, bounds, starts, cells, grid size, grid
    assert (index[starts + t + 1 + int(index[starts + t])] > 0) == dense
    cells = len(coords)
    out, now, then = (np.empty(cells, dtype=np.int64) for _ in range(3))
    anchor = sum(1 << int(offsets[i] + coords[0, i]) for i in range(len(sizes)))
    moved = 0
    for _ in range(300):
        last = int((rng.random(t) < rng.uniform(0.05, 0.9)).astype(np.int64) @ (1 << np.arange(t, dtype=object))) | anchor
        mask = last
        for b in rng.choice(t, size=int(rng.integers(1, 4)), replace=False):
            mask ^= 1 << int(b)
        mask |= anchor
        x, words = context_words(mask, n_words)
        dx, dwords = context_words(mask ^ last, n_words)
        leaving, total = moved_cells(x, words, dx, dwords, flat, index, out)
        before = set(then[: member_cells(*context_words(last, n_words), flat, then)].tolist())
        after = set(now[: member_cells(x, words, flat, now)].tolist())
        if leaving < 0:
            assert 2 * total > cells
            continue
        moved += 1
        left = {c for c in out[:leaving].tolist() if c in before}
        entered = {c for c in out[leaving:total].tolist() if c not in before}
        assert left == before - after and (before - left) | entered == after
        assert set(out[leaving:total].tolist()) <= after  # entering candidates all belong
    assert moved > 100


@pytest.mark.parametrize("sizes", [(40, 3, 5), (7, 2, 3, 2), (100, 30), (9,)])
def test_a_context_s_members_come_off_the_grid_in_its_grid_points(sizes):
    from pcor_sql.core.cell_moves import grid_members, grid_size

    rng = np.random.default_rng(sum(sizes))
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(sizes))), sizes), axis=1)
    coords = grid[rng.random(len(grid)) < 0.6]  # some combinations have no rows
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    t = int(sum(sizes))
    flat = flat_bits(coords, offsets, always=int(offsets[0] + coords[0, 0]))
    index = cell_index(coords, offsets, t)
    out, expected = np.empty(len(coords), dtype=np.int64), np.empty(len(coords), dtype=np.int64)
    for _ in range(300):
        mask = sum(1 << int(b) for b in np.flatnonzero(rng.random(t) < rng.choice([0.1, 0.5, 0.9])))
        mask |= 1 << int(offsets[0] + coords[0, 0])  # the bit `flat_bits` pads with: every context has it
        x, words = context_words(mask, (t + 63) // 64)
        selected = [sum(mask >> int(offsets[i] + d) & 1 for d in range(s)) for i, s in enumerate(sizes)]
        assert grid_size(x, words, index) == int(np.prod(selected))
        k = grid_members(x, words, index, out)
        n = member_cells(x, words, flat, expected)
        assert sorted(out[:k].tolist()) == expected[:n].tolist()
