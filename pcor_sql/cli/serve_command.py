"""`pcor-sql serve`: the analyst service over a DuckDB file (or a Spark session) and its ledger
(DESIGN.md §8). Analysts hold a token (`pcor-sql analyst add`) and send JSON; the data stays here."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.errors import UserError
from pcor_sql.pipeline import DEFAULT_MIN_EPSILON

#: The per-request work cap's default (`pcor_sql.service.http_app.DEFAULT_MAX_WORK`, kept here so
#: that `--help` needs no service packages).
DEFAULT_MAX_WORK = 50_000
#: Seconds a stop waits for open connections before it closes them (running searches stop at once).
GRACE_S = 3


def serve(
    db: o.Db = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The TCP port.")] = 8000,
    min_epsilon: Annotated[float, typer.Option(
        "--min-epsilon", help="The smallest ε an analyst may ask for per request.")] = DEFAULT_MIN_EPSILON,
    max_keys: Annotated[int, typer.Option("--max-keys", help="The most keys per request.")] = 100,
    workers: Annotated[int, typer.Option(
        "--workers", help="Requests that run at once, each on its own cursor (more wait their turn).")] = 4,
    max_work: Annotated[int, typer.Option(
        "--max-work", metavar="N", help="The most validity checks + EM candidates one request's search may use "
        "(a count, never a time: past it the request fails, charged, with the generic refusal).")] = DEFAULT_MAX_WORK,
    ssl_keyfile: Annotated[Optional[str], typer.Option(
        "--ssl-keyfile", metavar="PATH", help="TLS private key (with --ssl-certfile: serve HTTPS).")] = None,
    ssl_certfile: Annotated[Optional[str], typer.Option(
        "--ssl-certfile", metavar="PATH", help="TLS certificate chain.")] = None,
    ledger: o.Ledger = None,
    engine: o.Engine = o.EngineName.duckdb,
    spark_master: o.SparkMaster = "local[*]",
) -> None:
    """Serve analysts over HTTP: GET /v1/datasets, POST /v1/explain, /v1/identify, /v1/cost,
    GET /v1/me, /v1/history, and the OpenAPI document at /openapi.json. Binds 127.0.0.1
    unless --host says otherwise; for TLS give --ssl-keyfile and --ssl-certfile, or put a
    reverse proxy in front. Stop it with Ctrl-C.

    \b
    Example:
        pcor-sql serve --db salaries.duckdb --port 8000
    """
    if db is None and engine is o.EngineName.duckdb:
        raise UserError("serve needs the data: --db FILE", "e.g. pcor-sql serve --db salaries.duckdb")
    if (ssl_keyfile is None) != (ssl_certfile is None):
        raise UserError("TLS needs both --ssl-keyfile and --ssl-certfile", "give both, or neither (plain HTTP)")
    try:
        import uvicorn

        from pcor_sql.service import app
    except ImportError:
        raise UserError("the service needs its extra packages (starlette, uvicorn)",
                        "pip install 'pcor-sql[service]'") from None
    from pcor_sql.cli.database import open_owner

    if max_work < 1:
        raise UserError(f"--max-work must be ≥ 1, got {max_work}", f"e.g. --max-work {DEFAULT_MAX_WORK}")
    with open_owner(db, ledger, engine=engine.value, spark_master=spark_master) as owner:
        application = app(owner, min_epsilon=min_epsilon, max_keys=max_keys, workers=workers, max_work=max_work)
        scheme = "https" if ssl_certfile else "http"
        sys.stderr.write(f"serving analysts on {scheme}://{host}:{port} (Ctrl-C stops)\n")
        log_requests()
        # uvicorn's own access log writes query strings (a token sent there would land in the log):
        # the service logs each request itself, path only (`service.http_plumbing.access_line`).
        config = uvicorn.Config(application, host=host, port=port, ssl_keyfile=ssl_keyfile,
                                ssl_certfile=ssl_certfile, log_level="info", access_log=False,
                                timeout_graceful_shutdown=GRACE_S)
        StoppingServer(config, application.state.service).run()


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

    return Stopping


def StoppingServer(config: object, service: object) -> object:  # noqa: N802 - a class made on demand
    return _stopping_server()(config, service)
