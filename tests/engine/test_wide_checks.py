"""Wide spaces (DESIGN.md §2 "Verifiers"): the compiled checks — indexed membership, and for Grubbs and z-score
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


def wide_shape(con: duckdb.DuckDBPyConnection, metric: str, rows: int = 60_000) -> tuple:
    """(summary, space) of table t: attributes a0..a2 of SIZES values drawn from the row's hash h,
    the metric the SQL expression `metric` (over h and id, with {stride} the product of SIZES and
    {size} the first; id 0 is the record), id 0 moved to cell (v0, v0, v0)."""
    digits, stride = [], 1
    for i, size in enumerate(SIZES):
        digits.append(f"'v' || ((h // {stride}) % {size}) AS a{i}")
        stride *= size
    con.execute(f"CREATE TABLE t AS SELECT id, {', '.join(digits)}, {metric.format(stride=stride, size=SIZES[0])} AS m "
                f"FROM (SELECT range AS id, hash(range) AS h FROM range({rows}))")
    con.execute("UPDATE t SET a0 = 'v0', a1 = 'v0', a2 = 'v0' WHERE id = 0")
    domains = {f"a{i}": [f"v{j}" for j in range(size)] for i, size in enumerate(SIZES)}
    schema = resolve_schema(con, "t", '"m"', by=list(domains), domains=domains)
    summary = build_summary(con, schema, with_values=True)
    return summary, ContextSpace(schema.attributes, record_cell(schema, {"a0": "v0", "a1": "v0", "a2": "v0"}))


@pytest.fixture(scope="module")
def wide():
    con = duckdb.connect()
    # Tie-heavy: whole numbers 0..30 by cell level, so many cells are constant or hold 2-3 values.
    yield wide_shape(con, "CASE WHEN id = 0 THEN 60.0 ELSE round((h // {stride}) % 7 + ((h // 7) % {size}) / 12.0) END")
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


BIRTHS = (("state", 20), ("year", 10), ("month", 12), ("weekday", 7))  # 16,800 cells, one row a state-day


@pytest.fixture(scope="module")
def births():
    """Shaped like a table of daily births per state: one row per state-day, an integer count
    drawn per state around 10..1,500 (full of ties), a state-day of a large state with 2."""
    con = duckdb.connect()
    days = 3652
    noise = "sqrt(-2 * ln(u1)) * cos(2 * pi() * u2)"
    con.execute(f"""CREATE TABLE t AS WITH g AS (
        SELECT s.range AS s, d.range AS day,
          (hash(s.range * 20011 + d.range * 2 + 1) % 4294967295 + 1) / 4294967297.0 AS u1,
          (hash(s.range * 30011 + d.range * 2 + 2) % 4294967296) / 4294967296.0 AS u2
        FROM range(20) s, range({days}) d),
      x AS (SELECT *, DATE '1990-01-01' + day::INTEGER AS dt, 10 * pow(150, s / 19.0) AS mu FROM g)
      SELECT s * {days} + day AS id, 's' || s AS state, 'y' || (year(dt) - 1990) AS year,
        'm' || (month(dt) - 1) AS month, 'w' || dayofweek(dt) AS weekday,
        CASE WHEN s = 17 AND day = 0 THEN 2.0 ELSE greatest(0, round(mu * (CASE WHEN dayofweek(dt) IN (0, 6)
          THEN 0.8 ELSE 1.05 END) + sqrt(mu) * {noise}))::DOUBLE END AS m
      FROM x""")
    domains = {name: [f"{name[0]}{j}" for j in range(size)] for name, size in BIRTHS}
    schema = resolve_schema(con, "t", '"m"', by=list(domains), domains=domains)
    summary = build_summary(con, schema, with_values=True)
    [row] = con.execute(f"SELECT state, year, month, weekday FROM t WHERE id = {17 * days}").fetchall()
    space = ContextSpace(schema.attributes, record_cell(schema, dict(zip(domains, row))))
    yield summary, space
    con.close()


@pytest.mark.parametrize("verifier", [Histogram(), Histogram(rel=0.05), Lof(), Lof(k=5),
                                      Lof(k=3, duplicates="plain")], ids=repr)
def test_births_shape_walked_contexts_agree_with_the_reference(births, verifier):
    """The window walks (`window_counts`) on many cells of a tied integer metric: V's own tie-free
    outlier value and an ordinary, much-tied value of its cell, in the searches' orders — from
    contexts near the full one (the window serves) down to V's cell (the heap past the window,
    the histogram's bins wider than the window)."""
    summary, space = births
    assert summary.count.size >= 16_000
    rng = np.random.default_rng(5)
    masks = walks(space, rng, 700)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    verdicts = []
    for v in (2.0, ordinary):
        if v == ordinary:  # the ordinary value must be V's own (its cell holds it)
            assert ordinary in summary.runs().cell_values(own)
        check = compiled_check(summary, space, verifier, v)
        for mask in masks:
            got = check(mask)
            assert got == reference(summary, space, verifier, v, mask), (verifier, v, mask)


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


def test_a_check_that_reads_past_the_window_widens_it_and_agrees(births, monkeypatch):
    """LOF's window near v (`lof_checks.lof_window`) is narrow; a context of many cells whose
    neighbourhood reaches past it answers WIDER and is checked again over a wider window
    (`lof_checks._WindowWalk`): the births walks reach that path, one by one and in batches, and
    every verdict equals the reference."""
    from pcor_sql.engine import lof_checks

    widened = []
    original = lof_checks._WindowWalk._widen

    def counting(self):
        widened.append(self)
        original(self)

    monkeypatch.setattr(lof_checks._WindowWalk, "_widen", counting)
    summary, space = births
    masks = walks(space, np.random.default_rng(5), 700)
    own = int(np.flatnonzero((summary.coords == np.array(space.anchor)).all(axis=1))[0])
    ordinary = float(np.median(summary.runs().cell_values(own)))
    walked = reached = 0
    for verifier in (Lof(), Lof(k=5), Lof(k=3, duplicates="plain")):
        for v in (2.0, ordinary):
            for batched in (False, True):
                widened.clear()
                check = compiled_check(summary, space, verifier, v)
                got = check.many(masks) if batched else [check(mask) for mask in masks]
                walked += 1
                reached += len(widened) > 1  # the first is the walk's own window
                assert got == [reference(summary, space, verifier, v, mask) for mask in masks], (verifier, v)
    assert reached >= 2, f"only {reached} of {walked} walks read past their first window"
