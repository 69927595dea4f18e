"""`pcor-sql serve`: the analyst service over a DuckDB file (or a Spark session) and its ledger
(DESIGN.md §8). Analysts hold a token (`pcor-sql analyst add`) and send JSON; the data stays here."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.errors import UserError
from pcor_sql.pipeline import DEFAULT_MAX_WORK, DEFAULT_MIN_EPSILON

if TYPE_CHECKING:  # annotations only: the light CLI imports no service module until it serves
    from types import ModuleType
    from typing import Callable

    from pcor_sql.owner import Owner
    from pcor_sql.service.owner_plane import AuditLog

#: Seconds a stop waits for open connections before it closes them (running searches stop at once).
GRACE_S = 3


def serve(
    ctx: typer.Context,
    db: o.Db = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The TCP port.")] = 8000,
    min_epsilon: Annotated[float, typer.Option(
        "--min-epsilon", help="The smallest ε an analyst may ask for per request.")] = DEFAULT_MIN_EPSILON,
    max_keys: Annotated[int, typer.Option("--max-keys", help="The most keys per request.")] = 100,
    workers: Annotated[int, typer.Option(
        "--workers", help="Requests that run at once, each on its own cursor and, over DuckDB on Linux, searching "
        "in a process of its own (more wait their turn). Up to the machine's cores.")] = 4,
    searches: Annotated[str, typer.Option(
        "--searches", metavar="processes|threads", help="Where searches run: each worker's own process (default "
        "over DuckDB on Linux: every core) or the workers' threads (one interpreter).")] = "processes",
    duckdb_threads: Annotated[str, typer.Option(
        "--duckdb-threads", metavar="auto|N", help="DuckDB's threads once the summaries are built. auto: its "
        "setting (every core) divided among the --workers, at least 1 — two workers on 2 cores answered 5–10% more "
        "light requests a second on one thread than on two. A summary rebuilt while serving uses every core.")] = "auto",
    max_work: Annotated[int, typer.Option(
        "--max-work", metavar="N", help="The most validity checks + EM candidates one request's search may use "
        "(a count, never a time: past it the request fails, charged, with the generic refusal).")] = DEFAULT_MAX_WORK,
    owner_port: Annotated[Optional[int], typer.Option(
        "--owner-port", metavar="PORT", help="The owner's listener (console, /v1/owner/...), on 127.0.0.1 only "
        "(default: --port + 1).")] = None,
    owner_token_file: Annotated[Optional[Path], typer.Option(
        "--owner-token-file", metavar="PATH", help="Also write this run's owner token to PATH: a new file of mode "
        "0600 renamed over whatever was there (never written through a link).")] = None,
    audit_log: Annotated[Optional[Path], typer.Option(
        "--audit-log", metavar="FILE", help="Append one JSON line per request to FILE (never a token); made mode "
        "0600, and refused if others may read it or it is a link.")] = None,
    ssl_keyfile: Annotated[Optional[str], typer.Option(
        "--ssl-keyfile", metavar="PATH", help="TLS private key (with --ssl-certfile: serve HTTPS).")] = None,
    ssl_certfile: Annotated[Optional[str], typer.Option(
        "--ssl-certfile", metavar="PATH", help="TLS certificate chain.")] = None,
    ledger: o.Ledger = None,
    engine: o.EngineOption = o.Engine.DUCKDB,
    spark_master: o.SparkMaster = "local[*]",
) -> None:
    """Serve analysts over HTTP: GET /v1/datasets, POST /v1/explain, /v1/identify, /v1/cost,
    GET /v1/me, /v1/history, the analyst page at /, and the OpenAPI document at /openapi.json.
    Binds 127.0.0.1 unless --host says otherwise; for TLS give --ssl-keyfile and
    --ssl-certfile, or put a reverse proxy in front. Stop it with Ctrl-C or SIGTERM.

    The owner's listener — the console at /console and /v1/owner/... — is on 127.0.0.1 only,
    at --owner-port (default --port + 1), opened by this run's owner token, which is written
    to FILE.pcor-serve.json beside the database (mode 0600; removed on a clean stop). While it
    runs, `pcor-sql analyst|dataset|budget ... --db FILE` and the owner's own explain-outlier,
    identify-anomaly and coe on FILE are carried out by the service.

    \b
    Example:
        pcor-sql serve --db salaries.duckdb --port 8000
    """
    if db is None and engine is o.Engine.DUCKDB:
        raise UserError("serve needs the data: --db FILE", "e.g. pcor-sql serve --db salaries.duckdb")
    if (ssl_keyfile is None) != (ssl_certfile is None):
        raise UserError("TLS needs both --ssl-keyfile and --ssl-certfile", "give both, or neither (plain HTTP)")
    try:
        import uvicorn

        from pcor_sql.service import app
    except ImportError:
        raise UserError("the service needs its extra packages (starlette, uvicorn)",
                        "pip install 'pcor-sql[service]'") from None
    if max_work < 1:
        raise UserError(f"--max-work must be ≥ 1, got {max_work}", f"e.g. --max-work {DEFAULT_MAX_WORK}")
    if searches not in ("processes", "threads"):
        raise UserError(f"--searches must be processes or threads, got {searches!r}", "e.g. --searches processes")
    whole = duckdb_threads.isascii() and duckdb_threads.isdigit() and int(duckdb_threads) >= 1
    if duckdb_threads != "auto" and not whole:
        raise UserError(f"--duckdb-threads must be auto or a whole number ≥ 1, got {duckdb_threads!r}",
                        "e.g. --duckdb-threads auto")
    owner_port = port + 1 if owner_port is None else owner_port
    if owner_port == port:
        raise UserError("--owner-port is the analysts' --port", f"give another, e.g. --owner-port {port + 1}")
    from pcor_sql.service import runtime_file

    found = None if db is None else runtime_file.live(db)
    if found is not None:
        raise UserError(f"{db} is served already (pid {found.get('pid')}, owner listener {found.get('owner_url')})",
                        "stop that service first, or serve another file")
    from pcor_sql.service.owner_plane import AuditLog

    audit = AuditLog(audit_log)  # first: a log others may read, or a link, is refused before anything starts
    sockets: list[socket.socket] = []
    token = runtime_file.new_token()
    scheme = "https" if ssl_certfile else "http"
    analyst_url, owner_url = f"{scheme}://{host}:{port}", f"{scheme}://127.0.0.1:{owner_port}"
    try:  # the runtime file goes only once the database is closed: a command that then finds none opens it
        sockets += [_bind(host, port, "--port"), _bind("127.0.0.1", owner_port, "--owner-port")]
        if db is not None:
            # Written as soon as the sockets listen, before the database opens: a command sent while the
            # service starts waits in the socket's queue rather than meeting a locked file.
            runtime_file.write(db, owner_url=owner_url, analyst_url=analyst_url, token=token)
        if owner_token_file is not None:  # a new 0600 file renamed over PATH (DESIGN.md §9), or one line
            runtime_file.write_token(owner_token_file, token)
        _serve(ctx, db, ledger, engine, spark_master, token, audit, sockets, uvicorn, app,
               analyst_url=analyst_url, owner_url=owner_url, owner_port=owner_port, min_epsilon=min_epsilon,
               max_keys=max_keys, workers=workers, max_work=max_work, ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile,
               processes=None if searches == "processes" else False,
               duckdb_threads=duckdb_threads if duckdb_threads == "auto" else int(duckdb_threads))
    finally:
        for sock in sockets:
            sock.close()
        audit.close()
        if db is not None:
            runtime_file.remove(db)


def _serve(ctx: typer.Context, db: Path | None, ledger: str | None, engine: o.Engine, spark_master: str, token: str,
           audit: AuditLog, sockets: list[socket.socket], uvicorn: ModuleType, app: Callable[..., Any], *,
           analyst_url: str, owner_url: str, owner_port: int,
           min_epsilon: float, max_keys: int, workers: int, max_work: int, ssl_keyfile: str | None,
           ssl_certfile: str | None, processes: bool | None, duckdb_threads: int | str) -> None:
    from pcor_sql.cli.database import open_owner
    from pcor_sql.service import runtime_file
    from pcor_sql.service.owner_app import Listeners, owner_app
    with open_owner(db, ledger, engine=engine.value, spark_master=spark_master) as owner:
        application = app(owner, min_epsilon=min_epsilon, max_keys=max_keys, workers=workers, max_work=max_work,
                          audit=audit, processes=processes, duckdb_threads=duckdb_threads)
        service = application.state.service
        for refused in service.refused.values():  # DESIGN.md §11 "Units across hosts": each said in one line
            sys.stderr.write(f"warning: {refused.line()}\n")
        served_db = None if db is None else Path(db).expanduser().resolve()
        commands = None if served_db is None else _commands(ctx.find_root().command, owner, served_db)
        owners = owner_app(service, token, commands=commands)
        sys.stderr.write(f"serving analysts on {analyst_url} (Ctrl-C stops)\n")
        sys.stderr.write(f"owner console on {owner_url}/console (loopback only; token in "
                         f"{runtime_file.path_for(db) if db is not None else '--owner-token-file'})\n")
        log_requests()
        # uvicorn's own access log writes query strings (a token sent there would land in the log):
        # the service logs each request itself, path only (`service.http_plumbing.access_line`).
        config = uvicorn.Config(Listeners(application, owners, owner_port), ssl_keyfile=ssl_keyfile,
                                ssl_certfile=ssl_certfile, log_level="info", access_log=False,
                                timeout_graceful_shutdown=GRACE_S, lifespan="on")
        StoppingServer(config, service).run_stopping(sockets)


def _bind(host: str, port: int, flag: str) -> socket.socket:
    """A listening socket on (host, port): taken before the service starts, so a busy port is one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on connections
    # whose socket says TCP; with protocol 0, a response's body waited for the client's delayed
    # ACK of its headers — 40 ms more per request on a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", f"choose another {flag}") from None
    sock.listen(2048)  # connections queue from now on, until the service accepts them
    sock.set_inheritable(True)
    return sock


def _commands(group: Any, owner: Owner, db: Path) -> Any:
    """Owner commands of the `pcor-sql` group this serve runs in, on the served file."""
    from pcor_sql.cli.served_commands import run_served

    return lambda argv: run_served(group, owner, db, argv)


def log_requests() -> None:
    """The service's access lines on stderr, like uvicorn's own."""
    import logging

    access = logging.getLogger("pcor_sql.service")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
        access.propagate = False


def _stopping_server() -> type:
    import uvicorn

    class Stopping(uvicorn.Server):
        """SIGTERM / Ctrl-C: first tell every running search to stop (each ends at its next unit of
        work and is recorded as interrupted), then uvicorn's own shutdown, bounded by GRACE_S."""

        def __init__(self, config: "uvicorn.Config", service: object):
            super().__init__(config)
            self.service = service

        def handle_exit(self, sig: int, frame: object) -> None:
            self.service.stop()  # type: ignore[attr-defined]
            super().handle_exit(sig, frame)

        def run_stopping(self, sockets: list) -> None:
            """Serve on `sockets`. uvicorn raises the stopping signal again once it has shut down:
            the handlers here turn it into a clean exit, so the caller's `finally` (closing the
            database, then removing the runtime file) runs."""
            import asyncio
            import signal

            def stopped(signum: int, frame: object) -> None:
                raise SystemExit(0)

            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, stopped)

            asyncio.run(self.serve(sockets=sockets))

    return Stopping


def StoppingServer(config: object, service: object) -> object:  # noqa: N802 - a class made on demand
    return _stopping_server()(config, service)
