"""The embedded ledger's write lock held per request (wall and the holder's CPU), with group commit
(`pcor_sql.ledger.duckdb_group_commit`) and without it (groups of one), alternating in one run.

    python -m benchmarks ledger-lock [--rows 1000000] [--requests 48] [--rounds 6] [--workers 2]

Serves `pcor_sql.service.app` in a thread of this process (`request_statements.serving`), and one
analyst's `--senders` threads (8) send LOF explain requests (samples 50) until `--requests` are
answered; the store's write lock is swapped for one that adds up, per outermost hold, the wall
time and the holding thread's CPU time (`time.thread_time`, DuckDB's own threads not counted).
Rounds alternate the order of the two modes; only their ratio in the same run means much.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.request_statements import serving
from benchmarks.service_load import PLANTED, TABLE
from benchmarks.service_scaling import EPSILON, VERIFIER, prepare


class TimedLock:
    """A reentrant lock that adds up how long it was held (outermost holds) and the holder's CPU."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()
        self.wall = self.cpu = 0.0
        self.holds = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        taken = self._lock.acquire(blocking, timeout)
        if taken:
            depth = getattr(self._local, "depth", 0)
            if depth == 0:
                self._local.started = (time.perf_counter(), time.thread_time())
            self._local.depth = depth + 1
        return taken

    def release(self) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            wall, cpu = self._local.started
            self.wall += time.perf_counter() - wall
            self.cpu += time.thread_time() - cpu
            self.holds += 1
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def main(argv: list[str] | None = None) -> None:
    import duckdb

    import pcor_sql
    import pcor_sql.service

    parser = argparse.ArgumentParser(prog="python -m benchmarks ledger-lock", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--senders", type=int, default=8)
    args = parser.parse_args(argv)
    db, tokens = prepare(args.rows, 1, Path(tempfile.mkdtemp(prefix="pcor-ledger-lock-")), print)
    con = duckdb.connect(str(db))
    owner = pcor_sql.Owner(con, warn=lambda m: None)
    app = pcor_sql.service.app(owner, workers=args.workers)
    store = owner.ledger.store
    lock = TimedLock()
    store._write_lock = store._group._lock = lock  # before any transaction of the service
    group_size = store._group._size
    figures: dict[str, list[tuple[float, float, float]]] = {"alone": [], "group": []}
    with serving(app) as url:
        handles = [pcor_sql.connect(url, tokens[0], timeout=600) for _ in range(args.senders)]

        def ask(handle: Any, j: int) -> None:
            handle.explain_outliers(TABLE, [j % PLANTED], epsilon=EPSILON, verifier=VERIFIER, samples=50)

        for j in range(4):  # warm: the lease, the admission memory, the search processes
            ask(handles[0], j)
        for turn in range(args.rounds):
            for mode in ("alone", "group") if turn % 2 == 0 else ("group", "alone"):
                store._group._size = group_size if mode == "group" else 1
                store._group.sizes = {}
                lock.wall = lock.cpu = 0.0
                lock.holds = 0
                left = iter(range(args.requests))
                taking = threading.Lock()

                def send(handle: Any) -> None:
                    while True:
                        with taking:
                            j = next(left, None)
                        if j is None:
                            return
                        ask(handle, j)

                started = time.perf_counter()
                threads = [threading.Thread(target=send, args=(h,)) for h in handles]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                took = time.perf_counter() - started
                per = 1000 / args.requests
                figures[mode].append((lock.wall * per, lock.cpu * per, args.requests / took))
                commits = ", ".join(f"{n}: {c}" for n, c in sorted(store._group.sizes.items()))
                print(f"{mode:>5} round {turn}: lock held {lock.wall * per:.1f} ms a request (CPU {lock.cpu * per:.1f}),"
                      f" {lock.wall / took:.0%} of {took:.2f} s, {args.requests / took:.2f} answered / s;"
                      f" COMMITs by transactions {{{commits}}}", flush=True)
        for handle in handles:
            handle.close()
    con.close()
    for mode, rows in figures.items():
        print(f"{mode:>5} median: lock held {statistics.median(r[0] for r in rows):.1f} ms a request,"
              f" CPU {statistics.median(r[1] for r in rows):.1f} ms, {statistics.median(r[2] for r in rows):.2f} answered / s")
