"""Microseconds per LOF and histogram check on a wide, births-shaped summary, by member cells,
against the previous checks measured in the same run (DESIGN.md §2's verdicts, both the same).

The table is shaped like daily births per state: one row per state-day (51 states × 20 years:
372,555 rows; state × year × month × weekday = 85,680 cells), an integer count drawn per state
around 10..1,500 (full of ties), and the record a state-day of a state averaging ~900 with 2
births. The contexts come in the orders a search asks them (descents from the full context to
V's cell, walks of sibling pairs, jumps: `tests.engine.test_wide_checks.walks`'s mix), so every
size of context is met. Each context is checked by
- the window walks (`core.verifiers.lof_window_walk`, `core.verifiers.histogram_walk`), which
  carry the context's rows per value near v along the moves, and
- the previous checks (`core.verifiers.lof_kernel_walk`, which carried member flags and N but
  found the values near v cell by cell; `core.verifiers.histogram_kernel`, O(member cells)),
each check timed alone (CPU time: a check is single-threaded), grouped by the context's member
cells; printed: the median µs per check of each and their ratio, and whether every verdict and
population size agreed.

    python -m benchmarks width-checks [--states 51] [--years 20] [--contexts 1500]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from typing import Any, Callable

import numpy as np

#: Member-cell groups the figures are printed by (upper bounds).
GROUPS = (1_000, 4_000, 16_000, 64_000, 1 << 62)


def births_table(con: Any, states: int, years: int) -> float:
    """Table t of the births shape; returns the record's value (2.0, row id 0)."""
    days = (datetime.date(1990 + years, 1, 1) - datetime.date(1990, 1, 1)).days
    big = int(round((states - 1) * np.log(90) / np.log(150)))  # the state averaging ~900
    noise = "sqrt(-2 * ln(u1)) * cos(2 * pi() * u2)"
    con.execute(f"""CREATE TABLE t AS WITH g AS (
        SELECT s.range AS s, d.range AS day,
          (hash(s.range * 20011 + d.range * 2 + 1) % 4294967295 + 1) / 4294967297.0 AS u1,
          (hash(s.range * 30011 + d.range * 2 + 2) % 4294967296) / 4294967296.0 AS u2
        FROM range({states}) s, range({days}) d),
      x AS (SELECT *, DATE '1990-01-01' + day::INTEGER AS dt, 10 * pow(150, s / {max(states - 1, 1)}.0) AS mu FROM g)
      SELECT CASE WHEN s = {big} AND day = 0 THEN 0 ELSE s * {days} + day + 1 END AS id, 's' || s AS state,
        'y' || (year(dt) - 1990) AS year, 'm' || (month(dt) - 1) AS month, 'w' || dayofweek(dt) AS weekday,
        CASE WHEN s = {big} AND day = 0 THEN 2.0 ELSE greatest(0, round(mu * (CASE WHEN dayofweek(dt) IN (0, 6)
          THEN 0.8 ELSE 1.05 END) + sqrt(mu) * {noise}))::DOUBLE END AS births
      FROM x""")
    return 2.0


def contexts(space: Any, rng: np.random.Generator, count: int) -> list[int]:
    """Descents from the full context, sibling walks and jumps (`test_wide_checks.walks`)."""
    out: list[int] = []
    while len(out) < count:
        mask = space.full
        while len(out) < count:
            out.append(mask)
            removable = space.shrink_bits(mask)
            if not removable:
                break
            mask &= ~(1 << removable[int(rng.integers(len(removable)))])
        mask = space.full & ~sum(1 << int(b) for b in rng.choice(space.free_bits, size=3, replace=False))
        for _ in range(100):
            nbs = space.neighbours(mask)
            a, b = (nbs[int(i)] for i in rng.integers(len(nbs), size=2))
            out += [a, b]
            mask = a
        out.append(space.random_admissible(rng))
    return out[:count]


def old_lof(summary: Any, space: Any, verifier: Any, v: float) -> Callable[[int], tuple[bool, int]]:
    """The LOF check as it walked before the window counts (`lof_kernel_walk`)."""
    from pcor_sql.core.jit import NO_WORDS, cell_index, context_words, flat_bits
    from pcor_sql.core.verifiers.lof_kernel_walk import cell_counts, lof_context_walk, new_state
    from pcor_sql.engine.lof_checks import LofRecord

    record = LofRecord(summary.runs(), v)
    flat = flat_bits(summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
    ints, floats = record.packed(verifier.k, verifier.duplicates, flat, cell_index(summary.coords, space.offsets,
                                                                                    space.t))
    state, member = new_state(summary.count.size)
    counts = cell_counts(record.starts, record.pos, record.keys, record.v)
    n_words, last = (space.t + 63) // 64, [0]

    def check(mask: int) -> tuple[bool, int]:
        x, words = context_words(mask, n_words)
        dx, dwords = context_words(mask ^ last[0], n_words) if last[0] else (0, NO_WORDS)
        last[0] = mask
        score, n, _ = lof_context_walk(x, words, dx, dwords, record.values, ints, floats, counts, state, member)
        return bool(score > verifier.threshold), int(n)

    return check


def old_histogram(summary: Any, space: Any, verifier: Any, v: float) -> Callable[[int], tuple[bool, int]]:
    """The one-pass histogram kernel (`histogram_kernel`), O(member cells) a check."""
    from pcor_sql.core.jit import cell_index, context_words, flat_bits
    from pcor_sql.core.verifiers.histogram_kernel import FALLBACK, histogram_kernel
    from pcor_sql.core.verifiers.moment_kernel import TRUE, cell_stats

    flat = flat_bits(summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
    index = cell_index(summary.coords, space.offsets, space.t)
    stats = cell_stats(summary.count, summary.s1, summary.s2, summary.vmin, summary.vmax)
    runs = summary.runs()
    probe = runs.probe(v)
    n_words = (space.t + 63) // 64

    def check(mask: int) -> tuple[bool, int]:
        x, words = context_words(mask, n_words)
        code, n = histogram_kernel(x, words, flat, index, stats, runs.values, probe.neg_a, probe.b, probe.A,
                                   probe.B, v, float(verifier.rel))
        if code == FALLBACK:
            return bool(verifier.check(summary.population(summary.member(space, mask), v))), int(n)
        return code == TRUE, int(n)

    return check


def timed(check: Callable[[int], Any], masks: list[int]) -> tuple[np.ndarray, list[Any]]:
    """CPU µs of each check, and the answers."""
    us, answers = np.empty(len(masks)), []
    for i, mask in enumerate(masks):
        started = time.process_time_ns()
        answers.append(check(mask))
        us[i] = (time.process_time_ns() - started) / 1e3
    return us, answers


def measure(states: int, years: int, count: int, seed: int) -> dict[str, Any]:
    import duckdb

    from pcor_sql.core.space import ContextSpace
    from pcor_sql.core.verifiers.histogram import Histogram
    from pcor_sql.core.verifiers.lof import Lof
    from pcor_sql.engine.compiled_checks import compiled_check
    from pcor_sql.engine.schema import resolve_schema
    from pcor_sql.engine.summary import build_summary, record_cell

    con = duckdb.connect()
    v = births_table(con, states, years)
    names = ("state", "year", "month", "weekday")
    sizes = (states, years, 12, 7)
    domains = {n: [f"{n[0]}{j}" for j in range(s)] for n, s in zip(names, sizes)}
    schema = resolve_schema(con, "t", '"births"', by=list(names), domains=domains)
    summary = build_summary(con, schema, with_values=True)
    [row] = con.execute(f"SELECT {', '.join(names)} FROM t WHERE id = 0").fetchall()
    space = ContextSpace(schema.attributes, record_cell(schema, dict(zip(names, row))))
    masks = contexts(space, np.random.default_rng(seed), count)
    cells = np.array([int(summary.member(space, m).sum()) for m in masks])
    out: dict[str, Any] = {"rows": summary.n_rows, "cells": int(summary.count.size), "contexts": count,
                           "load": os.getloadavg()[0]}
    for name, verifier, old in (("lof", Lof(), old_lof), ("histogram", Histogram(), old_histogram)):
        new_check, old_check = compiled_check(summary, space, verifier, v), old(summary, space, verifier, v)
        new_check(masks[0]), old_check(masks[0])  # compiled code loaded, the first (fresh) context
        new_us, new_answers = timed(compiled_check(summary, space, verifier, v), masks)
        old_us, old_answers = timed(old(summary, space, verifier, v), masks)
        rows = []
        low = 0
        for high in GROUPS:
            sel = (cells >= low) & (cells < high)
            if sel.any():
                a, b = float(np.median(new_us[sel])), float(np.median(old_us[sel]))
                rows.append({"cells": f"{low:,}-{min(high, summary.count.size):,}", "contexts": int(sel.sum()),
                             "new_us": round(a, 1), "old_us": round(b, 1), "ratio": round(b / a, 1)})
            low = high
        out[name] = {"groups": rows, "same": new_answers == old_answers,
                     "all_new_us": round(float(np.median(new_us)), 1), "all_old_us": round(float(np.median(old_us)), 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks width-checks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=51)
    parser.add_argument("--years", type=int, default=20)
    parser.add_argument("--contexts", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    from pcor_sql.errors import UserError

    for flag, value in (("--states", args.states), ("--years", args.years), ("--contexts", args.contexts)):
        if value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 10")
    result = measure(args.states, args.years, args.contexts, args.seed)
    print(f"births shape: {result['rows']:,} rows, {result['cells']:,} cells, {result['contexts']} contexts, "
          f"load {result['load']:.1f} (CPU µs per check, median)")
    for name in ("lof", "histogram"):
        r = result[name]
        print(f"{name}: window walk {r['all_new_us']} µs, before {r['all_old_us']} µs; "
              f"verdicts and sizes {'the same' if r['same'] else 'DIFFER'}")
        print(f"  {'member cells':>15} {'contexts':>8} {'walk µs':>9} {'before µs':>10} {'ratio':>7}")
        for g in r["groups"]:
            print(f"  {g['cells']:>15} {g['contexts']:>8} {g['new_us']:>9} {g['old_us']:>10} {g['ratio']:>6}×")
    return 0 if all(result[n]["same"] for n in ("lof", "histogram")) else 1
