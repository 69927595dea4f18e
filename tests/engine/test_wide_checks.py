"""Wide spaces (issue 28): the compiled checks — indexed membership, and for Grubbs and z-score
populations carried along the moves — give the reference's verdicts and sizes on thousands of
contexts per verifier, on tie-heavy data, in the orders searches ask them: random descents from
the full context (one value less each step), walks of single flips, two-bit sibling moves and
unrelated jumps (which sum afresh, or walk from the full context's saved state when it is
near)."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from pcor_sql.core.space import ContextSpace
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.histogram import Histogram
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.schema import resolve_schema
from pcor_sql.engine.summary import build_summary, record_cell

SIZES = (240, 8, 5)  # 9,600 cells (most present), 253 values: 250 free bits, 4 words


@pytest.fixture(scope="module")
def wide():
    con = duckdb.connect()
    rows = 60_000
    digits, stride = [], 1
    for i, size in enumerate(SIZES):
        digits.append(f"'v' || ((h // {stride}) % {size}) AS a{i}")
        stride *= size
    # Tie-heavy: whole numbers 0..30 by cell level, so many cells are constant or hold 2-3 values.
    con.execute(f"CREATE TABLE t AS SELECT id, {', '.join(digits)}, "
                f"CASE WHEN id = 0 THEN 60.0 ELSE round((h // {stride}) % 7 + ((h // 7) % {SIZES[0]}) / 12.0) END AS m "
                f"FROM (SELECT range AS id, hash(range) AS h FROM range({rows}))")
    con.execute("UPDATE t SET a0 = 'v0', a1 = 'v0', a2 = 'v0' WHERE id = 0")
    domains = {f"a{i}": [f"v{j}" for j in range(size)] for i, size in enumerate(SIZES)}
    schema = resolve_schema(con, "t", '"m"', by=list(domains), domains=domains)
    summary = build_summary(con, schema, with_values=True)
    space = ContextSpace(schema.attributes, record_cell(schema, {"a0": "v0", "a1": "v0", "a2": "v0"}))
    yield summary, space
    con.close()


def walks(space: ContextSpace, rng: np.random.Generator, count: int) -> list[int]:
    """Contexts in the orders the searches ask them, `count` in all."""
    out: list[int] = []
    while len(out) < count:
        mask = space.full
        while len(out) < count:  # a descent: one value less until V's cell
            out.append(mask)
            removable = space.shrink_bits(mask)
            if not removable:
                break
            mask &= ~(1 << removable[int(rng.integers(len(removable)))])
        mask = space.random_admissible(rng)
        for _ in range(200):  # a walk of flips, with sibling pairs (parent's two neighbours)
            nbs = space.neighbours(mask)
            a, b = (nbs[int(i)] for i in rng.integers(len(nbs), size=2))
            out += [a, b]
            mask = a
        out.append(space.random_admissible(rng))  # a jump
        # A jump to a few values short of the full context: walked from its saved state.
        out.append(space.full & ~sum(1 << int(b) for b in rng.choice(space.free_bits, size=3, replace=False)))
    return out[:count]


def reference(summary, space, verifier, v, mask):
    pop = summary.population(summary.member(space, mask), v)
    return bool(verifier.check(pop)), int(pop.n)


@pytest.mark.parametrize("verifier", [Grubbs(), Grubbs(alpha=0.3), ZScore(), ZScore(z=1.2), Histogram(rel=0.05),
                                      Lof(k=5), Lof(k=3, duplicates="plain")], ids=repr)
def test_thousands_of_walked_contexts_agree_with_the_reference(wide, verifier):
    summary, space = wide
    assert space.t > 64 * 3
    rng = np.random.default_rng(11)
    count = 3000 if isinstance(verifier, (Grubbs, ZScore)) else 1000  # the LOF reference is slower
    masks = walks(space, rng, count)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])  # V's cell
    ordinary = float(np.median(summary.runs().cell_values(own)))
    verdicts = []
    for v in (60.0, ordinary):  # planted far out; an ordinary, much-tied value of V's cell
        check = compiled_check(summary, space, verifier, v)
        for mask in masks:
            got = check(mask)
            assert got == reference(summary, space, verifier, v, mask), (verifier, v)
            verdicts.append(got[0])
    assert any(verdicts) and not all(verdicts)


def jumps(space: ContextSpace, rng: np.random.Generator, count: int) -> list[int]:
    """Unrelated contexts in a row, as the uniform search draws them, and small ones near V's
    cell (a few values per attribute), each a jump from the last: summed off the grid alone."""
    out: list[int] = []
    while len(out) < count:
        out.append(space.random_admissible(rng))
        near = space.v_mask
        for b in rng.choice(space.free_bits, size=int(rng.integers(0, 12)), replace=False):
            near |= 1 << int(b)
        out.append(near)
    return out[:count]


@pytest.mark.parametrize("verifier", [Grubbs(), Grubbs(alpha=0.3), ZScore(), ZScore(z=1.2)], ids=repr)
def test_thousands_of_jumps_agree_with_the_reference(wide, verifier):
    summary, space = wide
    rng = np.random.default_rng(12)
    masks = jumps(space, rng, 3000)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    values = (60.0, float(np.median(summary.runs().cell_values(own))), 14.0)
    verdicts = []
    for v in values:
        check = compiled_check(summary, space, verifier, v)
        for mask in masks:
            got = check(mask)
            assert got == reference(summary, space, verifier, v, mask), (verifier, v)
            verdicts.append(got[0])
    assert any(verdicts) and not all(verdicts)
