"""What handing a search to a service's search process costs (DESIGN.md §10 "Reads in DuckDB, searches in workers").

    python -m benchmarks handoff [--rows 1000000] [--repeats 15]

One record's seeded search (BFS, ε = 0.2, n = 50) on the scale benchmark's `base` table, run
in this thread and through a `SearchProcess` (the request, verifier and record pickled, the
summary mapped from its file, the `RecordRelease` pickled back), alternating; the same record
and seed each time, so both sides do the same checks (each side's verdict cache is empty: the
thread's is cleared, and each sample gets a fresh child, started and warmed untimed, as the
service starts them). Prints the medians and
their difference: the per-request overhead of the hand-off.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import statistics
import time
import warnings


def main(argv: list[str] | None = None) -> None:
    import duckdb

    import pcor_sql
    from benchmarks.scale_tables import ensure_table
    from pcor_sql.core.randomness import record_source
    from pcor_sql.engine.search_processes import SearchProcess
    from pcor_sql.engine.shared_summary import SharedSummaries
    from pcor_sql.engine.verdicts import VerdictCache

    parser = argparse.ArgumentParser(prog="python -m benchmarks handoff", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--workdir", default="/tmp/pcor-scale")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    path = ensure_table(Path(args.workdir), "base", args.rows, print)["path"]
    con = duckdb.connect(path, read_only=True)
    session = pcor_sql.Session(con, ledger=":memory:", warn=lambda m: None, allow_seeded=True)
    shared = SharedSummaries()
    entry = "pcor_sql.service.search_child"  # the service's children: kernels loaded at start
    child = SearchProcess(shared, entry)
    try:
        for verifier in ("grubbs", "lof"):
            request = pcor_sql.outlier_request(con, "SELECT v FROM t WHERE id = 0", verifier=verifier, epsilon=0.2,
                                               seed=3, search="bfs")
            prepared = session.prepare(request)
            prepared.summary.runs() if verifier == "lof" else None
            child.warm([prepared.summary])
            here, there = [], []
            for _ in range(args.repeats):
                prepared.summary.verdicts = VerdictCache()
                started = time.perf_counter()
                prepared.release(0, record_source(3, 0))
                here.append(time.perf_counter() - started)
                child.close(kill=True)  # a fresh child: its verdict cache is empty too
                child = SearchProcess(shared, entry)
                child.warm([prepared.summary])
                started = time.perf_counter()
                child.release_all(prepared, 3, [0], lambda: None)
                there.append(time.perf_counter() - started)
            a, b = statistics.median(here), statistics.median(there)
            print(f"{verifier}: in the thread {a * 1e3:.1f} ms, through a search process {b * 1e3:.1f} ms"
                  f" (hand-off {1e3 * (b - a):+.1f} ms; {args.rows:,} rows; load {os.getloadavg()[0]:.1f})")
    finally:
        child.close(kill=True)
        shared.close()
