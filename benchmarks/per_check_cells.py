"""One validity check by the number of member cells, on the births shape (85,680 cells), and the
narrow per-check figures on the base shape (1,200 cells): the scale benchmark's `per-check` case.

Births (`benchmarks.scale_tables.births_sql`: an integer count full of ties; the record a
state-day of 2 births where the state averages ~900). For each context size — V's cell alone
(1 cell), then more values of weekday, month, year and state up to the full context (85,680
cells) — each verifier checks the context many times on one `Evaluator`, through `_verify` (no
verdict cache), each check timed alone:

- *after a move*: the check before it was of a neighbour (the context with one value more or
  less, a different one each time): what a BFS or a descent pays per check;
- *after a jump*: the check before it was of a context of the same size that shares only V's
  values: every member cell changes.

Figures are the median CPU µs of a check (`time.process_time` around each call: a check is
single-threaded), with the 1-minute load beside them. The narrow figures are
`benchmarks.per_check` on 1,200 cells (random contexts).

    PYTHONPATH=. python -m benchmarks.per_check_cells /tmp/pcor-scale/births-372555.duckdb
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

VERIFIERS = ("lof", "histogram", "grubbs", "zscore")
#: Values selected per attribute (state, year, month, weekday), V's own first: 1 ... 85,680 cells.
SIZES = ((1, 1, 1, 1), (1, 1, 1, 7), (1, 1, 12, 7), (1, 20, 12, 7), (5, 20, 12, 7), (25, 20, 12, 7),
         (51, 20, 12, 7))
CHECKS = 60  # timed checks per (verifier, size, order)


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _context(space: Any, counts: tuple[int, ...], skip: int = 0) -> int:
    """The context keeping, per attribute, V's value and the next counts[i] − 1 values after
    `skip` others (wrapping around the domain): the same size for any skip."""
    mask = 0
    for i, (attr, k) in enumerate(zip(space.attributes, counts)):
        size, a = len(attr.domain), space.anchor[i]
        chosen = {a} | {(a + 1 + skip + j) % size for j in range(k - 1)} if k < size else set(range(size))
        if len(chosen) < k:  # the skip wrapped onto V's value: take the next ones
            chosen |= {j for j in range(size) if j not in chosen}
            chosen = set(sorted(chosen, key=lambda j: (j != a, (j - a) % size))[:k])
        for j in chosen:
            mask |= 1 << (space.offsets[i] + j)
    return mask


def _timed(check: Callable[[int], Any], before: Callable[[int], int], mask: int, count: int) -> list[float]:
    """CPU µs of `check(mask)` `count` times, each right after an untimed `check(before(i))`."""
    out = []
    for i in range(count):
        check(before(i))
        started = time.process_time()
        check(mask)
        out.append((time.process_time() - started) * 1e6)
    return out


def measure_births(db: str, checks: int = CHECKS) -> dict[str, Any]:
    import duckdb

    from benchmarks.scale_tables import SHAPES, record_cell_values
    from pcor_sql.core.space import ContextSpace
    from benchmarks.per_check import _verifier as make_verifier
    from pcor_sql.engine.evaluator import Evaluator
    from pcor_sql.engine.schema import resolve_schema
    from pcor_sql.engine.summary import build_summary, record_cell

    con = duckdb.connect(db, read_only=True)
    names = [name for name, _ in SHAPES["births"]]
    schema = resolve_schema(con, "t", '"v"', by=names)
    summary = build_summary(con, schema)
    space = ContextSpace(schema.attributes, record_cell(schema, record_cell_values("births")))
    v = float(con.execute("SELECT v FROM t WHERE id = 0").fetchall()[0][0])
    rows = []
    for name in VERIFIERS:
        verifier = make_verifier(name)
        evaluator = Evaluator(con, summary, space, v, verifier)
        evaluator._verify(space.full)  # lazy loads (runs, tables, compiling)
        for counts in SIZES:
            mask = _context(space, counts)
            cells = int(summary.member(space, mask).sum())
            flips = space.neighbour_flips(mask)
            far = _context(space, counts, skip=max(counts))
            if far == mask:  # the full context, or V's cell: jump to the other end instead
                far = space.v_mask if mask != space.v_mask else space.full
            move = _timed(evaluator._verify, lambda i: mask ^ flips[(i * 7919) % len(flips)], mask, checks)
            jump = _timed(evaluator._verify, lambda i: far, mask, checks)
            rows.append({"verifier": name, "values": list(counts), "cells": cells, "valid": evaluator._verify(mask),
                         "move_us": statistics.median(move), "jump_us": statistics.median(jump), "load": _load()})
    con.close()
    return {"rows": rows, "cells": int(summary.count.size)}


def measure_narrow() -> dict[str, Any]:
    """`benchmarks.per_check` on the base shape (1,200 cells, 1M rows, 3,000 random contexts)."""
    from benchmarks import per_check

    out = per_check.measure(1_000_000, 3_000, ("lof", "grubbs"))
    return {name: {"us": out[name]["us"], "load": out[name]["load"], "same_verdicts": out[name]["same_verdicts"]}
            for name in ("lof", "grubbs")}


def run_child(workdir: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """The measurement in a fresh process (its own compile cache state and memory)."""
    import benchmarks
    import pcor_sql
    from benchmarks.scale_tables import BIRTHS_ROWS, ensure_table

    table = ensure_table(workdir, "births", BIRTHS_ROWS, report)
    out = workdir / "per-check.json"
    roots = dict.fromkeys(str(Path(m.__file__).resolve().parents[1]) for m in (benchmarks, pcor_sql))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*roots, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    proc = subprocess.run([sys.executable, "-m", "benchmarks.per_check_cells", table["path"], "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0]}
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    parser = argparse.ArgumentParser(prog="python -m benchmarks.per_check_cells", description=__doc__.splitlines()[0])
    parser.add_argument("db", help="a DuckDB file holding the births-shaped table t")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--checks", type=int, default=CHECKS)
    parser.add_argument("--no-narrow", action="store_true", help="skip the base shape's figures")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    result = {"births": measure_births(args.db, args.checks)}
    if not args.no_narrow:
        result["narrow"] = measure_narrow()
    text = json.dumps(result)
    if args.out:
        args.out.write_text(text)
    else:
        for r in result["births"]["rows"]:
            print(f"{r['verifier']:<10} {r['cells']:>7,} cells  move {r['move_us']:>10.1f} µs  "
                  f"jump {r['jump_us']:>10.1f} µs  valid {r['valid']}  load {r['load']}")
        for name, r in (result.get("narrow") or {}).items():
            print(f"narrow {name}: {r['us']:.1f} µs (load {r['load']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
