"""An analyst's explain request as the ledger's history grows: with the history's release_id
index (sql/ledger.sql) and without it (the ledger before it), alternating, in one run.

    python -m benchmarks ledger-history [--history 1200000] [--requests 10]

A request's reservation looks up its release ids and its outcome updates them; without the
index both scanned the whole history, so a service got slower with every request it answered.
The history is grown by copying its first rows under new release ids (not a real request each).
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
    from benchmarks.service_load import ATTRIBUTES, RELEASABLE, TABLE, generation_sql

    parser = argparse.ArgumentParser(prog="python -m benchmarks ledger-history", description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1_200_000, help="history rows to grow to")
    parser.add_argument("--requests", type=int, default=10, help="timed requests per sample")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    path = os.path.join(tempfile.mkdtemp(prefix="pcor-ledger-history-"), "ledger.duckdb")
    con = duckdb.connect(path)
    for statement in generation_sql(50_000):
        con.execute(statement)
    owner = pcor_sql.Owner(con, warn=lambda m: None)
    owner.register(TABLE, TABLE, key="id", metric="salary", by=[a for a, _ in ATTRIBUTES], releasable=list(RELEASABLE))
    handle = owner.analyst()  # the analyst's path: a reservation and an outcome per request

    def per_request() -> float:
        handle.explain_outliers(TABLE, [0], epsilon=0.01, verifier="grubbs")
        started = time.perf_counter()
        for j in range(args.requests):
            handle.explain_outliers(TABLE, [j % 16], epsilon=0.01, verifier="grubbs")
        return (time.perf_counter() - started) / args.requests

    def index(on: bool) -> None:
        con.execute("CREATE INDEX IF NOT EXISTS history_release_id ON pcor.history (release_id)" if on
                    else "DROP INDEX IF EXISTS pcor.history_release_id")

    rows = lambda: con.execute("SELECT count(*) FROM pcor.history").fetchall()[0][0]  # noqa: E731
    for label in ("small", "grown"):
        if label == "grown":
            index(False)
            seed = rows()
            con.execute(f"INSERT INTO pcor.history SELECT h.* REPLACE (h.release_id || '-' || r.range::VARCHAR AS"
                        f" release_id) FROM pcor.history h, range({max(1, args.history // seed)}) r")
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(3):
            for on in (False, True):
                index(on)
                times[on].append(per_request())
        print(f"{label} history ({rows():,} rows): without the index {statistics.median(times[False]) * 1e3:.1f} ms"
              f" a request, with it {statistics.median(times[True]) * 1e3:.1f} ms (medians of 3 × {args.requests});"
              f" load {os.getloadavg()[0]:.1f}")
    con.close()
