"""Microseconds per validity check (targets: LOF ≤ 12 µs, Grubbs ≤ 6 µs at 1,200 cells).

Each verifier is timed twice on the same contexts: as the evaluator checks (compiled for Grubbs,
z-score and histogram: `engine.compiled_checks`) and on the reference path (`SummaryPopulation`
and `verifier.check`, the evaluator with its compiled check switched off), with the ratio; the
verdicts of both must agree (the counts of valid contexts are printed side by side).

A table of the scale benchmark's `base` shape (50 × 6 × 4 = 1,200 cells, `benchmarks.scale_tables`)
is generated in an in-memory DuckDB; the per-cell summary is built once; then each verifier
checks the same random admissible contexts of the planted record (a fixed seed), each on a fresh
`Evaluator`, so no verdict is served from a cache. A check is what a search pays per context:
the context's membership over cells, its population, and the verdict. For the moment-only
verifiers the parts are timed apart too, which is the profile of what a check spends.

Figures are CPU time per check (`time.process_time`), with the 1-minute load average beside
them: a check is single-threaded, so CPU time is close to a quiet machine's wall time, while wall
time at load 10 on 2 cores reads several times more. Cache and frequency effects of the load
remain: compare figures measured in the same run or at the same load.

    python -m benchmarks per-check --rows 1000000 --contexts 3000
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from benchmarks.scale_tables import SHAPES, generation_sql, record_cell_values

VERIFIERS = ("grubbs", "zscore", "histogram", "lof", "lof-plain")  # lof-plain: lof(duplicates='plain')
#: random: independent uniformly random admissible contexts (each check starts from nothing);
#: moves: a random walk, each context one admissible move from the last (what a search checks
#: in a row, so the wide summaries' checks that follow the change pay only for it).
ORDERS = ("random", "moves")


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _per_item_us(fn: Callable[[Any], Any], items: Sequence[Any]) -> float:
    """CPU µs per item (process time: a check is single-threaded, so on a loaded machine this
    reads close to a quiet machine's wall time, where wall time reads several times more)."""
    started = time.process_time()
    for item in items:
        fn(item)
    return (time.process_time() - started) / max(len(items), 1) * 1e6


def _verifier(name: str) -> Any:
    from pcor_sql.core.verifiers.grubbs import Grubbs
    from pcor_sql.core.verifiers.histogram import Histogram
    from pcor_sql.core.verifiers.lof import Lof
    from pcor_sql.core.verifiers.zscore import ZScore

    if name == "lof-plain":
        return Lof(duplicates="plain")
    return {"grubbs": Grubbs, "zscore": ZScore, "histogram": Histogram, "lof": Lof}[name]()


def contexts_of(space: Any, rng: np.random.Generator, contexts: int, order: str) -> list[int]:
    """`contexts` admissible contexts of `space` in the given order (ORDERS)."""
    if order == "random":
        return [space.random_admissible(rng) for _ in range(contexts)]
    masks = [space.random_admissible(rng)]
    while len(masks) < contexts:
        options = space.neighbours(masks[-1])
        masks.append(options[int(rng.integers(0, len(options)))])
    return masks


def measure(rows: int, contexts: int, verifiers: Sequence[str], seed: int = 1, shape: str = "base",
            order: str = "random") -> dict[str, Any]:
    """{verifier: {"us": per check, "valid": count, "load": load before}, "parts": {...}} on a
    table of the scale benchmark's `shape` (`benchmarks.scale_tables.SHAPES`)."""
    import duckdb

    from pcor_sql.core.space import ContextSpace
    from pcor_sql.engine.evaluator import Evaluator
    from pcor_sql.engine.schema import resolve_schema
    from pcor_sql.engine.summary import SummaryPopulation, build_summary, record_cell

    con = duckdb.connect()
    for statement in generation_sql(shape, rows):
        con.execute(statement)
    names = [name for name, _ in SHAPES[shape]]
    schema = resolve_schema(con, "t", '"v"', by=names)
    summary = build_summary(con, schema)
    # Row 0 is the planted record (`scale_tables`): every attribute at its first value, v = 120.
    space = ContextSpace(schema.attributes, record_cell(schema, record_cell_values(shape)))
    masks = contexts_of(space, np.random.default_rng(seed), contexts, order)
    v = 120.0
    for mask in masks:  # builds and keeps the membership rows, so the first verifier pays no more
        summary.member(space, mask)
    out: dict[str, Any] = {"rows": rows, "cells": int(len(summary.count)), "contexts": contexts, "shape": shape,
                           "order": order}
    for name in verifiers:
        verifier = _verifier(name)
        Evaluator(con, summary, space, v, verifier)._verify(masks[0])  # lazy loads (runs, tables, compiling)
        evaluator = Evaluator(con, summary, space, v, verifier)
        load = _load()
        verdicts: list[bool] = []
        us = _per_item_us(lambda m: verdicts.append(evaluator._verify(m)), masks)
        out[name] = {"us": round(us, 2), "valid": int(sum(verdicts)), "load": load}
        reference = Evaluator(con, summary, space, v, verifier)
        reference._compiled = None  # the reference path: SummaryPopulation and verifier.check
        if name == "grubbs":  # its critical values are cached by N: time them as a search meets them
            from pcor_sql.core.verifiers.grubbs import grubbs_critical_one

            grubbs_critical_one.cache_clear()
        ref_verdicts: list[bool] = []
        ref_us = _per_item_us(lambda m: ref_verdicts.append(reference._verify(m)), masks)
        out[name].update(reference_us=round(ref_us, 2), reference_valid=int(sum(ref_verdicts)),
                         same_verdicts=ref_verdicts == verdicts)
    # The parts of a moment-only check, each over the same contexts.
    members = [summary.member(space, m) for m in masks]
    pops = [SummaryPopulation.of(summary, member, v) for member in members]
    parts = {
        "membership": _per_item_us(lambda m: summary.member(space, m), masks),
        "population (n, min, max)": _per_item_us(lambda member: SummaryPopulation.of(summary, member, v), members),
        "moments (mean, m2)": _per_item_us(lambda pop: pop._centred(), pops),
    }
    for name in ("grubbs", "zscore"):
        if name in verifiers:
            verifier = _verifier(name)
            if name == "grubbs":  # its critical values are cached by N: time them as a search meets them
                from pcor_sql.core.verifiers.grubbs import grubbs_critical_one

                grubbs_critical_one.cache_clear()
            parts[f"{name} verdict"] = _per_item_us(verifier.check, pops)
    out["parts"] = {key: round(value, 2) for key, value in parts.items()}
    out["parts_load"] = _load()
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks per-check", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--contexts", type=int, default=3000)
    parser.add_argument("--verifiers", default=",".join(VERIFIERS), help=f"among {','.join(VERIFIERS)}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shape", default="base", choices=("base", "wide70", "wide500"),
                        help="the scale benchmark's table shape (wide500: 46,080 cells at 1M rows)")
    parser.add_argument("--order", default="random", choices=ORDERS,
                        help="random contexts, or a random walk of one move at a time")
    args = parser.parse_args(argv)
    names = [n for n in args.verifiers.split(",") if n]
    unknown = [n for n in names if n not in VERIFIERS]
    if unknown:
        parser.error(f"unknown verifier {unknown[0]!r}: use some of {','.join(VERIFIERS)}")
    result = measure(args.rows, args.contexts, names, args.seed, args.shape, args.order)
    kind = "random contexts" if args.order == "random" else "contexts one move apart"
    print(f"{args.shape}: {result['rows']:,} rows, {result['cells']:,} cells, {result['contexts']:,} {kind}")
    for name in names:
        r = result[name]
        print(f"  {name:<10} {r['us']:>8.1f} CPU µs/check (reference {r['reference_us']:.1f}, "
              f"{r['us'] / max(r['reference_us'], 1e-9):.2f}×)   valid {r['valid']:,} (reference {r['reference_valid']:,}"
              f"{'' if r['same_verdicts'] else ', VERDICTS DIFFER'})   load {r['load']}")
    print(f"parts of a moment-only check on the reference path (load {result['parts_load']}):")
    for key, us in result["parts"].items():
        print(f"  {key:<26} {us:>8.1f} µs")
    return result
