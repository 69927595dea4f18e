"""The DuckDB statements one analyst request costs the service, counted and timed from DuckDB's
own query log (a light request's cost is mostly these).

    python -m benchmarks request-statements [--rows 1000000] [--requests 30] [--busy]

Serves `pcor_sql.service.app` (one worker) on 127.0.0.1 in a thread of this process, sends LOF
explain requests (samples 50, one planted key each) one after another through
`pcor_sql.connect`, and reads `duckdb_logs()`: per request, each statement and the time from its
start to the next statement's start (its own time plus the Python until the next one). `--busy`
holds the worker's line full so every request is admitted first (the service's state when every
worker is busy), which adds the admission's statements.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

from benchmarks.service_scaling import EPSILON, VERIFIER, prepare
from benchmarks.service_load import PLANTED, TABLE


def kind(sql: str) -> str:
    """A statement's label: its first words, names of the ledger's tables kept, parameters dropped."""
    text = re.sub(r"\s+", " ", sql).strip()
    table = re.search(r"pcor\.(\w+)", text)
    head = " ".join(text.split(" ")[:2]).rstrip(",(")
    return f"{head} … {table.group(1)}" if table else head[:40]


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the service did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def main(argv: list[str] | None = None) -> None:
    import duckdb

    import pcor_sql
    import pcor_sql.service

    parser = argparse.ArgumentParser(prog="python -m benchmarks request-statements", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--busy", action="store_true", help="every request admitted first, as when workers are busy")
    args = parser.parse_args(argv)
    db, tokens = prepare(args.rows, 1, Path(tempfile.mkdtemp(prefix="pcor-statements-")), print)
    con = duckdb.connect(str(db))
    owner = pcor_sql.Owner(con, warn=lambda m: None)
    app = pcor_sql.service.app(owner, workers=1)
    service = app.state.service
    took: list[float] = []
    with serving(app) as url, pcor_sql.connect(url, tokens[0], timeout=600) as handle:
        def ask(j: int) -> None:
            handle.explain_outliers(TABLE, [j % PLANTED], epsilon=EPSILON, verifier=VERIFIER, samples=50)

        for j in range(3):
            ask(j)
        if args.busy:  # a request "would wait" whenever the pool reports a worker in use
            service.would_wait = lambda name: True  # type: ignore[method-assign]
        con.execute("CALL enable_logging('QueryLog')")
        for j in range(args.requests):
            started = time.perf_counter()
            ask(j)
            took.append(time.perf_counter() - started)
        con.execute("CALL disable_logging()")
        logged = con.execute("SELECT timestamp, message FROM duckdb_logs() WHERE type = 'QueryLog'"
                             " AND message NOT LIKE 'CALL %able_logging%' ORDER BY timestamp").fetchall()
    con.close()
    gaps: dict[str, list[float]] = defaultdict(list)
    for (at, sql), (after, _) in zip(logged, logged[1:]):
        gaps[kind(sql)].append((after - at).total_seconds() * 1000)
    per = len(logged) / args.requests
    print(f"{per:.1f} statements a request ({len(logged)} over {args.requests} requests); "
          f"request p50 {statistics.median(took) * 1000:.1f} ms{' (every request admitted)' if args.busy else ''}")
    print(f"{'a request':>10} {'ms to next (median)':>20}  statement")
    for name, xs in sorted(gaps.items(), key=lambda kv: -sum(kv[1])):
        print(f"{len(xs) / args.requests:>10.1f} {statistics.median(xs):>20.2f}  {name}")
