"""Validity-only exploration of the context lattice: the collection step of the `explore` search.

`collect` gathers valid contexts of V while reading nothing but validity, and coins drawn from
the source it is given. It never reads a population or a utility, so the set it returns is a
random variable whose law is a function of COE(D, V) alone (DESIGN.md §7): free under OCDP.
The privacy argument is in `pcor_sql.core.searches.explore`, which spends the whole ε on one
exponential mechanism over what this collects.

Where it looks — from the top of the lattice down, then back up to the largest valid contexts:

1. Descents and climbs. A descent starts at the full context and, one step at a time, removes
   one uniformly random selected free value — or, if `collapse` is k > 0, with probability 1/k
   every value of one uniformly random attribute but V's own (off by default) — until the
   context is valid. A climb then adds removed values back, one at a time in a uniformly random order,
   whenever the larger context is still valid, and ends on a context no one value larger is
   valid: a top of COE around it, where the largest populations are. Descents repeat until
   `patience` of them in a row end on a top already met (the tops reachable this way are, most
   likely, all met), or a cap is reached. On an ordinal attribute a value removed or added is a
   bin at one end of its run, and a collapse leaves V's own bin, so every context met is
   admissible (`ContextSpace.shrink_bits`, `grow_bits`).
2. When the whole lattice fits in the budget (n_admissible ≤ `max_checks`): every admissible
   context not yet checked, by size in domain values, largest first, uniformly random order
   among equals. Then every valid context is collected: the collected set is COE(D, V).

Why not a plain sweep by size from the top (DESIGN.md §7's order) on large lattices: the
levels hold C(t − m, k) contexts (salaries: 1, 22, 231, 1,540, 7,315, 26,334, …) and for LOF
the largest valid contexts of a planted outlier are often 6–9 values below the top — tens of
thousands of checks away. Descents reach that depth in about ten checks and the climbs bring
them back to the top of COE; measured in BENCHMARKS.md (`python -m benchmarks explore`).

Why climbs add one value only, and why collapses are off by default (measured on the planted
outliers with LOF, the collection replayed on memoised verdicts, 4 seeds each, mean of best
collected / exact best). Climbs used to try pairs of values where no single value could be
added (validity is not monotone), but certifying a top that way costs C(k, 2) checks for k
missing values; at an equal count of checks the descents those checks buy instead find more.
Collapses were meant for homicides, where the best context often keeps V's own value alone on
one attribute (the weapon): six removals of that attribute in one descent, which uniform
removals rarely make. With pairs / without pairs / without pairs and with collapses (k = 4):
homicides at 3,000 checks 0.990 / 0.994 / 0.996, at 4,000 0.995 / 0.998 / 0.997; salaries at
4,000 0.987 / 0.990 / 0.986, at 8,000 — / 0.992 / 0.990. Collapses help homicides only at
small caps (1,000 checks, pairs on: 0.923 without, 0.942 with) and cost salaries a little.
Patience: with 8, homicides stopped after about 1,050 checks (0.964, collapses on); with 32,
after about 3,100 (0.995, collapses on). (A one-off owner-side replay, `collect` on memoised verdicts, not a
command here; the cap, not the patience, stopped the runs above but for the patience figures.)

It stops when `samples` valid contexts are collected, when `max_checks` distinct contexts
have been checked, or when neither phase has anything left. Every stopping rule is a count
or a function of the validity answers — never of the clock (see `searches.explore` for why).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from pcor_sql.core import neighbour_rows
from pcor_sql.core.descent_batches import batchable, descend_in_batches
from pcor_sql.core.randomness import Source, uniform_open
from pcor_sql.core.space import ContextSpace

#: Descents in a row that end on a top already met before the descents stop.
DEFAULT_PATIENCE = 32
#: One step in this many of a descent collapses an attribute to V's own value (0: never, the
#: default — measured neutral at the default cap; see the module docstring and `_Explorer.descend`).
DEFAULT_COLLAPSE = 0
# Levels up to this many contexts are listed and shuffled whole; larger ones are sampled.
_LIST_LEVEL = 200_000


class ValidityOracle(Protocol):
    space: ContextSpace

    def is_valid(self, mask: int) -> bool: ...


class _Done(Exception):
    """A cap is reached: stop exploring."""


@dataclass
class Collection:
    """What `collect` found: the valid contexts in the order met, every context checked with
    its verdict, the tops the climbs reached, and why it stopped."""

    valid: dict[int, None] = field(default_factory=dict)
    checked: dict[int, bool] = field(default_factory=dict)
    tops: dict[int, None] = field(default_factory=dict)
    stopped: str = "exhausted"


class _Explorer:
    def __init__(self, oracle: ValidityOracle, source: Source, samples: int, max_checks: int, collapse: int):
        self.oracle = oracle
        self.space = oracle.space
        self.source = source
        self.samples = samples
        self.max_checks = max_checks
        self.collapse = collapse
        space = self.space
        # Per attribute, its values other than V's own (the bits a collapse removes).
        self.others = [((space.attribute_bits(space.full, i) << space.offsets[i]) & ~space.v_mask)
                       for i in range(space.m)]
        self.out = Collection()

    def valid(self, mask: int) -> bool:
        verdict = self.out.checked.get(mask)
        if verdict is not None:
            return verdict
        if len(self.out.checked) >= self.max_checks:
            self.out.stopped = "max_checks"
            raise _Done
        verdict = self.out.checked[mask] = bool(self.oracle.is_valid(mask))
        if verdict:
            self.out.valid[mask] = None
            if len(self.out.valid) >= self.samples:
                self.out.stopped = "samples"
                raise _Done
        return verdict

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random order of range(n): argsort of n uniform draws (ties have
        probability ~2⁻⁵²; the stable sort breaks one by index)."""
        return np.argsort(uniform_open(self.source, n), kind="stable") if n else np.empty(0, dtype=np.intp)

    # -- 1. descents and climbs --------------------------------------------------------
    def descend(self) -> int | None:
        """`descend`, except that each step, with probability 1/`collapse`, removes every value
        of one uniformly random attribute but V's own instead of one value (reads validity
        and coins only, like `descend`)."""
        space, mask = self.space, self.space.full
        while not self.valid(mask):
            removable = space.shrink_bits(mask)
            if not removable:
                return None
            if self.collapse and int(self.source.integers(0, self.collapse)) == 0:
                wide = [a for a in self.others if mask & a]
                mask &= ~wide[int(self.source.integers(0, len(wide)))]
            else:
                mask &= ~(1 << removable[int(self.source.integers(0, len(removable)))])
        return mask

    def climb(self, mask: int) -> int:
        while True:
            up = self.step_up(mask, self.space.grow_bits(mask))
            if up is None:
                return mask
            mask = up

    def step_up(self, mask: int, bits: list[int]) -> int | None:
        """The first valid context one bit of `bits` above `mask`, trying them in a uniformly
        random order (drawn lazily, one index at a time: a climb step usually stops after a
        few tries, and a whole permutation per step cost more than the checks it saved)."""
        while bits:
            j = int(self.source.integers(0, len(bits)))
            bits[j], bits[-1] = bits[-1], bits[j]
            up = mask | (1 << bits.pop())
            if self.valid(up):
                return up
        return None

    def descents(self, patience: int) -> None:
        stale = 0
        while stale < patience:
            mask = self.descend()
            top = None if mask is None else self.climb(mask)
            if top is None or top in self.out.tops:
                stale += 1
            else:
                self.out.tops[top] = None
                stale = 0

    # -- 2. the whole lattice by size --------------------------------------------------
    def sweep(self) -> None:
        """Every admissible context by size in domain values, largest first, uniformly random
        order within a size (those already checked cost nothing)."""
        if self.space.ordinal:
            self.sweep_index()
            return
        full, bits = self.space.full, list(self.space.free_bits)
        for k in range(len(bits) + 1):
            for removed in self.level(bits, k):
                self.valid(full & ~removed)

    def sweep_index(self) -> None:
        """The sweep on a space with ordinal attributes, whose removal sets are mostly not
        admissible (a gap in a run of bins): list the admissible contexts by index (the sweep
        runs only when they fit the budget), group them by size, largest first, and shuffle
        within a size."""
        space = self.space
        by_size: dict[int, list[int]] = {}
        for w in range(space.n_admissible):
            mask = space.from_free(w)
            by_size.setdefault(mask.bit_count(), []).append(mask)
        for size in sorted(by_size, reverse=True):
            level = by_size[size]
            for i in self.permutation(len(level)):
                self.valid(level[i])

    def level(self, bits: Sequence[int], k: int) -> Iterator[int]:
        """The removal sets of size k over `bits` as masks, in uniformly random order."""
        n = math.comb(len(bits), k)
        if n <= _LIST_LEVEL:
            combos = list(itertools.combinations(bits, k))
            for i in self.permutation(n):
                yield sum(1 << b for b in combos[i])
            return
        # Too large to list (only for lattices far beyond any budget the sweep runs on).
        seen: set[int] = set()
        while len(seen) < n:
            removed = sum(1 << bits[i] for i in self.permutation(len(bits))[:k])
            if removed not in seen:
                seen.add(removed)
                yield removed


def descend(space: ContextSpace, is_valid: Callable[[int], bool], source: Source) -> int | None:
    """From the full context, remove one uniformly random removable value (a selected free
    value; on an ordinal attribute, the bin at one end of its run) until the context is valid;
    None if V's own cell is reached and invalid. Reads validity and coins only."""
    mask = space.full
    removable: list[int] | None = None
    while not is_valid(mask):
        if removable is None or space.ordinal:
            removable = space.shrink_bits(mask)
        if not removable:
            return None
        # Without ordinal attributes the removable values are the selected free ones: the list
        # loses the one drawn and stays in bit order, as `shrink_bits` would list it anew (which
        # costs O(free bits) a step: the descents' main cost on 5,000 values, as
        # `python -m benchmarks scale --cases wide5000` measures).
        mask &= ~(1 << removable.pop(int(source.integers(0, len(removable)))))
    return mask


def random_descents(oracle: ValidityOracle, source: Source, count: int) -> list[int]:
    """Up to `count` valid contexts, each the first valid one met by a `descend`.

    Every step reads validity only, and the coins come from `source` independently of the
    data, so the law of the result is a function of COE(D, V) alone: equal on OCDP
    neighbours, hence free. The contexts are large (few values removed), which is where the
    utilities point; BFS adds them to its starting frontier. Where the oracle checks many
    contexts at once, each descent's path is asked in batches (`core.descent_batches`): the
    same descents, the same coins."""
    found: dict[int, None] = {}
    space = oracle.space
    if batchable(space, oracle, source):  # the same contexts and coins, the path asked in batches
        many = oracle.valid_many  # type: ignore[attr-defined]
        keyed = getattr(oracle, "valid_keyed", None) if neighbour_rows.applies(space) else None
        walk: Callable[[], int | None] = lambda: descend_in_batches(space, oracle.is_valid, many, source, keyed)
    else:
        walk = lambda: descend(space, oracle.is_valid, source)
    for _ in range(count):
        mask = walk()
        if mask is not None:
            found[mask] = None
    return list(found)


def collect(oracle: ValidityOracle, source: Source, *, samples: int, max_checks: int,
            patience: int = DEFAULT_PATIENCE, collapse: int = DEFAULT_COLLAPSE) -> Collection:
    """Valid contexts of V met by the two phases of the module docstring, until `samples` are
    collected, `max_checks` distinct contexts are checked or there is nothing left to do."""
    ex = _Explorer(oracle, source, samples, max_checks, collapse)
    try:
        ex.descents(patience)
        if ex.space.n_admissible <= max_checks:
            ex.sweep()
    except _Done:
        pass
    return ex.out
