"""`python -m benchmarks ledger-services`: answered/s with one and two services on one PostgreSQL
ledger against one service on the embedded ledger, and the reservation's latency on each store,
in one run (DESIGN.md §11). The work is in `benchmarks.ledger_services`."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Optional

import typer

from pcor_sql.errors import UserError


def ledger_services(
    rows: Annotated[int, typer.Option("--rows", metavar="N", help="Rows of the registered table.")] = 100_000,
    clients: Annotated[int, typer.Option("--clients", metavar="N", help="Concurrent analysts (threads).")] = 8,
    requests: Annotated[int, typer.Option("--requests", metavar="N", help="Timed requests per analyst.")] = 20,
    workers: Annotated[int, typer.Option("--workers", metavar="N", help="Each service's --workers.")] = 2,
    reservations: Annotated[int, typer.Option(
        "--reservations", metavar="N", help="Reservations timed on each store.")] = 300,
    fingerprint_rows: Annotated[int, typer.Option(
        "--fingerprint-rows", metavar="N", help="Rows of the table whose content fingerprint is timed (0: skip).")]
    = 10_000_000,
    server: Annotated[Optional[str], typer.Option(
        "--server", metavar="URL", help="A PostgreSQL server to use (postgresql://user@host:port; its user may "
        "create databases: pcor_bench_N are made, replaced). Default: a scratch server started from the Debian "
        "postgresql package's binaries, as the tests do, but durable (fsync and synchronous commits on, as the "
        "embedded ledger's DuckDB file is).")] = None,
    workdir: Annotated[Path, typer.Option("--workdir", metavar="DIR", help="Where the data files are made.")]
    = Path("/tmp/pcor-ledger-services"),
) -> None:
    """Serve a generated table with `pcor-sql serve` (child processes, 127.0.0.1): once on its
    embedded ledger, once and twice (two copies) on one PostgreSQL ledger; CLIENTS analysts send
    REQUESTS light explain requests each. Print answered/s of each against the embedded one,
    the reservation's p50/p99 latency on each store, and the content fingerprint's time.

    \b
    Example:
        python -m benchmarks ledger-services --rows 100000 --clients 8 --requests 20
    """
    from benchmarks.ledger_services import report, run

    for name, value in (("--rows", rows), ("--clients", clients), ("--requests", requests), ("--workers", workers),
                        ("--reservations", reservations)):
        if value < 1:
            raise UserError(f"{name} must be ≥ 1, got {value}", f"e.g. {name} 8")
    scratch = None
    if server is None:
        from tests.postgres_server import Server, missing  # the tests' scratch server (run from a checkout)

        reason = missing()
        if reason is not None:
            raise UserError(f"no PostgreSQL server to measure on: {reason}", "give one: --server postgresql://user@host:port")
        scratch = Server(durable=True)
        scratch.start()
        base = scratch.url("postgres").rsplit("/", 1)[0]
    else:
        base = server.rstrip("/")
    names = itertools.count()

    def fresh() -> str:
        import psycopg

        name = f"pcor_bench_{next(names)}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
            con.execute(f"DROP DATABASE IF EXISTS {name}")
            con.execute(f"CREATE DATABASE {name}")
        return f"{base}/{name}"

    try:
        found = run(workdir, fresh, rows=rows, clients=clients, requests=requests, workers=workers,
                    reservations=reservations, fingerprint_rows=fingerprint_rows, say=lambda line: typer.echo(line, err=True))
    finally:
        if scratch is not None:
            scratch.stop()
    for line in report(found):
        typer.echo(line)
