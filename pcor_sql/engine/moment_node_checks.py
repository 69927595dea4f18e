"""Grubbs and z-score checks from a BFS node (`core.verifiers.moment_node`) for the compiled
checks of a wide summary (`engine.compiled_checks`): a batch that is one node's neighbours, and
single checks that step between one node's neighbours (the start's sweep down from the full
context asks the full context's neighbours one at a time, each two slabs away from the last).

Either is answered from the node where that costs less than the walk's two slabs a neighbour:
off the grid of value combinations, the node's points and the slabs of the values it lacks
(`grid_pays`); else one pass over the cells (`lof_checks.node_pays` without window counts). The
walk's state is left where it was, so the next walked check moves from the context it holds.
Codes and sizes are the walk's (`moment_node`'s docstring), so every verdict — and so every
seeded release — is the same; a node's neighbours answered before they are asked are kept
only as verdicts of public structure (DESIGN.md §2, "validity-only steps cost nothing").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def grid_pays(space: Any, bit_attr: list[int], parent: int, flips: list[int]) -> bool:
    """Whether the node's grid points and the slabs of the asked-for values it lacks (the grid
    node pass, each point also added to its values' slabs) cost less than the walk's two slabs
    a neighbour."""
    sizes = [space.attribute_bits(parent, i).bit_count() for i in range(space.m)]
    grid = math.prod(sizes)
    slabs = absent = 0
    for b in flips:
        slab = grid // max(sizes[bit_attr[b]], 1)
        slabs += slab
        absent += 0 if parent >> b & 1 else slab
    return grid + absent < 2 * slabs


class NodeChecks:
    """`moment_node_many` for one compiled check (`m`: its `compiled_checks._Moments`; `ws`:
    the walk's `walk_stats`; grubbs = 1 with α's `table`, or z-score's threshold z)."""

    def __init__(self, m: Any, ws: Any, shift: float, grubbs: int, z: float, table: Any):
        self.m, self.ws, self.shift, self.grubbs, self.z = m, ws, shift, grubbs, z
        self.table = np.zeros((2, 1), dtype=np.float64) if table is None else table  # z-score reads none
        space = m.space
        self.cells = m.flat.shape[0]
        self.bit_attr = [i for i, attr in enumerate(space.attributes) for _ in attr.domain]
        self.gridded = ws.shape[0] > self.cells  # rows in grid order: the pass reads the node's points
        self.asked: list[int] = []  # the last single checks asked (at most two)
        self.parent: int | None = None  # the node whose neighbours `known` holds
        self.known: dict[int, tuple[int, int]] = {}

    def pays(self, parent: int, flips: list[int]) -> bool:
        if self.gridded:
            return grid_pays(self.m.space, self.bit_attr, parent, flips)
        from pcor_sql.engine.lof_checks import node_pays

        return node_pays(self.m.space, self.bit_attr, self.cells, 0, parent, flips)

    def codes(self, parent: int, flips: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(codes, ns) of the node's neighbours with the bits `flips` toggled."""
        from pcor_sql.core.verifiers.moment_node import moment_node_many
        from pcor_sql.core.verifiers.walk_batches import words_of

        m = self.m
        codes, ns = np.empty(len(flips), dtype=np.int64), np.empty(len(flips), dtype=np.int64)
        moment_node_many(words_of(parent, m.n_words), np.asarray(flips, dtype=np.int64), m.flat, m.space.m, m.index,
                         m.stats, self.ws, self.shift, m.v, self.grubbs, self.z, self.table, codes, ns)
        return codes, ns

    def batch(self, masks: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """(codes, ns) of `masks` when they are one node's neighbours and the node pass pays."""
        from pcor_sql.engine.lof_checks import node_of

        node = node_of(masks)
        if node is None or not self.pays(*node):
            return None
        return self.codes(*node)

    def single(self, mask: int) -> tuple[int, int] | None:
        """(code, n) of one context asked alone, when it is a neighbour of the node whose
        neighbours were answered; the third of three single checks in a row that are one
        node's neighbours answers all of that node's (where the pass pays), later ones are
        read off. None: walk it."""
        from pcor_sql.engine.lof_checks import node_of

        hit = self.known.get(mask)
        asked = self.asked = [*self.asked[-2:], mask]
        if hit is not None or len(asked) < 3:
            return hit
        node = node_of(asked)
        if node is None or node[0] == self.parent:
            return None
        parent = node[0]
        space = self.m.space
        neighbours = [nb for nb in space.neighbours(parent) if space.is_admissible(nb)]
        flips = [(nb ^ parent).bit_length() - 1 for nb in neighbours]
        self.parent, self.known = parent, {}
        if not self.pays(parent, flips):
            return None
        codes, ns = self.codes(parent, flips)
        self.known = dict(zip(neighbours, zip(codes.tolist(), ns.tolist())))
        return self.known.get(mask)
