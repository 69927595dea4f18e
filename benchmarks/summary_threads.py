"""The per-cell summary build (with the sorted runs) at DuckDB's `threads` = 1, 2 and 16, the
old build against the new one, alternating (DESIGN.md §10 "Building the summary").

    python -m benchmarks summary-threads [PATH] [--repeats 7] [--threads 1,2,16] [--phases]

PATH is a DuckDB file holding the scale benchmark's table `t` (`benchmarks/scale_tables.py`, any
shape: its ENUM columns are the attributes), e.g. /tmp/pcor-scale/base-10000000.duckdb from
`python -m benchmarks scale`; without PATH that 10M-row table is generated first if missing
(about 3 s of DuckDB, not timed).
A thread count above the machine's cores is left out. One untimed build of each first (numba's
kernels are compiled or loaded from their cache then).

old = the build as it was before item 4 (`benchmarks.summary_build_old`: keys and partition in
one thread, the runs sorted in up to 8 threads whatever `threads` says); new = the package's
(`pcor_sql.engine.counting_runs.read_cells` + `CellRows.runs`: every step in `threads` threads).
Each times the ENUM path of `build_summary(..., with_values=True)`: the scan into Arrow, the
keys, the counting sort, each cell's sort and moments. Within a repeat the order of old and new
alternates. Every pair's outputs are compared byte for byte: the table says whether all matched.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

DEFAULT = Path("/tmp/pcor-scale/base-10000000.duckdb")


def _builds(con: Any, schema: Any) -> dict[str, Any]:
    from benchmarks.summary_build_old import old_build
    from pcor_sql.engine.build_threads import duckdb_threads
    from pcor_sql.engine.counting_runs import read_cells

    def new() -> tuple:
        threads = duckdb_threads(con)
        rows = read_cells(con, schema, threads)
        present, runs, moments = rows.runs(threads)
        return present, runs, moments

    def old() -> tuple:
        present, runs, moments, _, _ = old_build(con, schema)
        return present, runs, moments

    return {"old": old, "new": new}


def same(a: tuple, b: tuple) -> bool:
    """Equal: the present cells, the runs (values and starts, -0.0 apart from 0.0) and each
    moment array (NaN equal to NaN)."""
    import numpy as np

    arrays = lambda x: [x[0], x[1].values, x[1].starts, *x[2]]  # noqa: E731
    return all(p.dtype == q.dtype and np.array_equal(p, q, equal_nan=p.dtype.kind == "f")
               and np.array_equal(np.signbit(p), np.signbit(q)) for p, q in zip(arrays(a), arrays(b)))


def measure(path: str, repeats: int, threads: list[int]) -> dict[str, Any]:
    import duckdb

    from pcor_sql.engine.schema import resolve_schema

    warnings.simplefilter("ignore")
    con = duckdb.connect(path, read_only=True)
    con.execute("SET enable_progress_bar = false")
    schema = resolve_schema(con, "t", "v")  # the ENUM columns: the table's attributes
    builds = _builds(con, schema)
    out: dict[str, Any] = {"rows": con.execute("SELECT count(*) FROM t").fetchall()[0][0], "threads": {},
                           "identical": True}
    for t in threads:  # untimed: compile or load the kernels, warm DuckDB's buffers
        con.execute(f"SET threads = {t}")
        out["identical"] &= same(builds["old"](), builds["new"]())
    for rep in range(repeats):
        for t in threads:
            con.execute(f"SET threads = {t}")
            entry = out["threads"].setdefault(t, {"old": [], "new": [], "load": []})
            results = {}
            for name in (("old", "new") if rep % 2 == 0 else ("new", "old")):
                entry["load"].append(os.getloadavg()[0])
                started = time.perf_counter()
                results[name] = builds[name]()
                entry[name].append(time.perf_counter() - started)
            out["identical"] &= same(results["old"], results["new"])
            out["cells"] = int(results["new"][0].size)
            del results
    con.close()
    return out


def phases(path: str, repeats: int, threads: list[int]) -> str:
    """Where the new build's time goes at each thread count (medians, ms): DuckDB's scan into
    Arrow alone, then `read_cells` (that scan, the keys and counts), the counting sort's scatter
    and the runs' sorts and moments (`sorted_runs`)."""
    import duckdb

    import pcor_sql.engine.counting_runs as counting_runs
    from pcor_sql.engine.build_threads import duckdb_threads
    from pcor_sql.engine.schema import resolve_schema

    con = duckdb.connect(path, read_only=True)
    con.execute("SET enable_progress_bar = false")
    schema = resolve_schema(con, "t", "v")
    sql = counting_runs.scan_sql(schema)
    sorting, spent = counting_runs.sorted_runs, {}

    def timed_sort(*args: Any) -> Any:
        started = time.perf_counter()
        out = sorting(*args)
        spent["sort"] = time.perf_counter() - started
        return out

    counting_runs.sorted_runs = timed_sort
    samples: dict[int, dict[str, list[float]]] = {t: {} for t in threads}
    try:
        for _ in range(repeats + 1):  # the first round untimed
            for t in threads:
                con.execute(f"SET threads = {t}")
                t0 = time.perf_counter()
                con.sql(sql).to_arrow_table()
                t1 = time.perf_counter()
                rows = counting_runs.read_cells(con, schema, duckdb_threads(con))
                t2 = time.perf_counter()
                rows.runs(t)
                t3 = time.perf_counter()
                for key, x in (("scan", t1 - t0), ("read_cells", t2 - t1), ("scatter", t3 - t2 - spent["sort"]),
                               ("sort", spent["sort"])):
                    samples[t].setdefault(key, []).append(x)
    finally:
        counting_runs.sorted_runs = sorting
        con.close()
    lines = ["new build by step, ms (median): scan alone | read_cells (scan, keys, counts) | scatter | sorts and moments",
             "| threads | scan alone | read_cells | scatter | sort |", "|---|---|---|---|---|"]
    for t, by in samples.items():
        lines.append(f"| {t} | " + " | ".join(f"{statistics.median(by[k][1:]) * 1000:.0f}"
                                               for k in ("scan", "read_cells", "scatter", "sort")) + " |")
    return "\n".join(lines)


def table(result: dict[str, Any]) -> str:
    ms = lambda xs: f"{statistics.median(xs) * 1000:.0f} ({min(xs) * 1000:.0f}–{max(xs) * 1000:.0f})"  # noqa: E731
    lines = [f"summary build, {result['rows']:,} rows, {result.get('cells', 0):,} cells; ms, median (min–max); "
             f"outputs identical: {'yes' if result['identical'] else 'NO'}",
             "| threads | old | new | new / old | load |", "|---|---|---|---|---|"]
    for t, e in result["threads"].items():
        ratio = statistics.median(e["new"]) / statistics.median(e["old"])
        lines.append(f"| {t} | {ms(e['old'])} | {ms(e['new'])} | {ratio:.2f}× | {min(e['load']):.1f}–{max(e['load']):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks summary-threads")
    parser.add_argument("path", nargs="?", default=str(DEFAULT))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", default="1,2,16", help="DuckDB `threads` settings, those above the cores left out")
    parser.add_argument("--phases", action="store_true", help="Also time the new build's steps at each setting")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = [t for t in (int(x) for x in args.threads.split(",")) if 1 <= t <= max(cores, 1)]
    if args.path == str(DEFAULT) and not DEFAULT.exists():
        from benchmarks.scale_tables import ensure_table

        ensure_table(DEFAULT.parent, "base", 10_000_000, lambda m: print(m, file=sys.stderr))
    if not Path(args.path).exists():
        print(f"no such file: {args.path}; give a DuckDB file with the scale benchmark's table t", file=sys.stderr)
        return 2
    result = measure(args.path, args.repeats, threads)
    print(table(result))
    if args.phases:
        print(phases(args.path, args.repeats, threads))
    print(f"{cores} cores; 1-minute load at the end: {os.getloadavg()[0]:.2f}")
    return 0 if result["identical"] else 1
