"""What an analyst's light request costs under DuckDB's `threads` setting: wall time and CPU
(this process's, DuckDB's pool threads included) per request, each setting in turn, alternating,
against the first setting measured in the same run.

    python -m benchmarks duckdb-threads [--rows 1000000] [--requests 30] [--threads 1,2,4,8,16] [--repeats 2]

A light request is a dozen small ledger and catalog statements and one record read around a
short search (Grubbs, ε = 0.01, through `Owner.analyst()`); DuckDB hands every statement to its
pool of `threads` threads, whose wake-ups cost CPU that statements of a few rows never win back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings


def main(argv: list[str] | None = None) -> None:
    import duckdb

    import pcor_sql
    from benchmarks.measure import load_average
    from benchmarks.service_load import ATTRIBUTES, RELEASABLE, TABLE, generation_sql

    parser = argparse.ArgumentParser(prog="python -m benchmarks duckdb-threads", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the registered table")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per sample")
    parser.add_argument("--threads", default="1,2,4,8,16", help="DuckDB threads settings to compare")
    parser.add_argument("--repeats", type=int, default=2, help="samples per setting, settings alternating")
    args = parser.parse_args(argv)
    settings = [int(t) for t in args.threads.split(",") if t.strip().isdigit()]
    if len(settings) != len(args.threads.split(",")) or min(settings, default=0) < 1 or args.requests < 1 \
            or args.repeats < 1 or args.rows < 100:
        parser.error("--threads takes positive integers (e.g. 1,2); --requests and --repeats at least 1, --rows 100")
    warnings.simplefilter("ignore")
    path = os.path.join(tempfile.mkdtemp(prefix="pcor-duckdb-threads-"), "threads.duckdb")
    con = duckdb.connect(path)
    for statement in generation_sql(args.rows):
        con.execute(statement)
    owner = pcor_sql.Owner(con, warn=lambda m: None)
    owner.register(TABLE, TABLE, key="id", metric="salary", by=[a for a, _ in ATTRIBUTES], releasable=list(RELEASABLE))
    handle = owner.analyst()

    def sample(threads: int) -> tuple[float, float]:
        con.execute(f"SET threads = {threads}")
        handle.explain_outliers(TABLE, [0], epsilon=0.01, verifier="grubbs")  # untimed: caches warm at this setting
        wall, cpu = time.perf_counter(), time.process_time()
        for j in range(args.requests):
            handle.explain_outliers(TABLE, [j % 16], epsilon=0.01, verifier="grubbs")
        return ((time.perf_counter() - wall) / args.requests, (time.process_time() - cpu) / args.requests)

    found: dict[int, list[tuple[float, float]]] = {t: [] for t in settings}
    loads = []
    for _ in range(args.repeats):
        for threads in settings:
            loads.append((load_average() or [float("nan")])[0])
            found[threads].append(sample(threads))
    con.close()
    base_wall = statistics.median(w for w, _ in found[settings[0]])
    base_cpu = statistics.median(c for _, c in found[settings[0]])
    print(f"A light explain through Owner.analyst() on {args.rows:,} rows, {args.requests} requests a sample, "
          f"{args.repeats} samples a setting (median), load {min(loads):.1f}–{max(loads):.1f}")
    print(f"{'threads':>8} {'wall ms':>9} {'vs first':>9} {'CPU ms':>8} {'vs first':>9}")
    for threads in settings:
        wall = statistics.median(w for w, _ in found[threads])
        cpu = statistics.median(c for _, c in found[threads])
        print(f"{threads:>8} {wall * 1000:>9.2f} {wall / base_wall:>8.2f}× {cpu * 1000:>8.2f} {cpu / base_cpu:>8.2f}×")
