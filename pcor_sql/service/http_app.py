"""The analyst service's HTTP API (DESIGN.md §8): a Starlette ASGI app over the owner's data.

    GET  /v1/datasets   the registered datasets this analyst may use (public by registration)
    POST /v1/explain    {dataset, keys, epsilon, verifier?, search?, samples?, utility?, start?, by?, ...}
    POST /v1/identify   {dataset, value | keys, beta, radius, epsilon, privacy?, k?, norm?}
    POST /v1/sql        {sql}: one EXPLAIN OUTLIER / IDENTIFY ANOMALY statement, as the request it spells
    POST /v1/cost       an explain or identify body → what it would charge (nothing charged; ?method=...)
    GET  /v1/me         this analyst's quotas and ε spent per notion
    GET  /v1/history    this analyst's own requests (paged: ?limit=N&before=RELEASE_ID)
    GET  /v1/releasable-keys  ?dataset=NAME&limit=N&offset=M: the keys one may ask about (public)
    GET  /healthz       whether the service is up (no token needed)
    GET  /openapi.json  the OpenAPI document (no token needed)

The paths, their handlers, who may call them and their schemas are one table
(`analyst_endpoints.ANALYST_ENDPOINTS`, rows of `endpoint_table.Endpoint`, each holding its
handler); the routes here and the OpenAPI document are generated from it. The service's state
and the plumbing the handlers share are `analyst_service.Service`.

Every request but the document needs `Authorization: Bearer <token>`; a missing, malformed,
unknown or revoked token gets one 401 with one body. A body is JSON checked by exact type and
size against the schema generated from the option specs (`request_schema`) before anything
else. Then the request runs through `pcor_sql.analyst.Analyst` — the pipeline's analyst policy,
the same code as in-process: reserve, then read; results in the order of the keys given.

Errors are `{"error": ..., "fix": ...}`, never a traceback: 400 bad input, 403 refused by the
trust model, 404/405 (paths are exact, never redirected; a 405 says Allow), 413/415 body too
large / not JSON, 429 quota or limit reached — all before the reservation, nothing charged —
422, the one generic failure after it (charged), and 503 for a request the stopping service
interrupted (recorded as interrupted). Every response is `Cache-Control: no-store`.
A refusal names nothing the analyst did not send or own: a limit reached is one message whether it is their quota or a unit's (`pipeline.limit_reached`).

Refusals do not wait for a worker. A request that would wait (every worker busy, or others
waiting for one) is first admitted (`Analyst.admit`: the request's checks, which read
only the request and the registry, then its cost against the dataset's limits and the analyst's
quota — a few small ledger reads; no row read, nothing charged) on a small pool of its own
cursors, so a refusal comes back while the workers are busy with releases; one that finds a
worker free goes straight to it, whose first steps are the same checks. What an admission read
is kept per analyst (`ledger.admission_memory`) and admits later requests without reading — the
kept spend raised by all this process charged since — but never refuses: a refusal comes from
a fresh read, and a request the worker refuses clears its analyst's memory. An admission is
first tried on the event loop with reads forbidden (`admission_memory.kept_only`, a Session
whose data access refuses every use): all kept, it admits there without a thread's round trip
(~0.1 ms of the interpreter); anything to read, and it runs on the admission pool instead.
Admission decides nothing else: the worker runs the request from the start, and its
reservation, atomic, alone decides what is charged — two requests admitted together near a
quota get one charge and one 429, never an overspend.

Bounded work (DESIGN.md §8). Every option has a declared maximum (the schemas carry it), and
each request's search is metered (`core.work`): past `max_work` validity checks and EM
candidates it stops, and the request fails with the generic 422. Each analyst's requests wait in
a line of their own and the workers serve the analysts' lines in turn (`worker_pool`): one
analyst's concurrent requests use every worker nobody else waits for, and another analyst's
request waits at most for the first running (capped) request to end, however many one token
sent. Stopping (`stop()`, SIGTERM under `pcor-sql serve`) interrupts every running search at
its next unit of work.

No cross-analyst channels. Verdict caches are per asker (`core.work.partition`), and with
`warm=True` (the default) each worker builds every registered dataset's summary before it
serves, so no analyst's first request is slower because nobody asked before.
"""

from __future__ import annotations

import contextlib
import math
import sys
from typing import TYPE_CHECKING, Any, AsyncIterator

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from pcor_sql import pipeline
from pcor_sql.core.choices import Engine
from pcor_sql.errors import UserError
from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS
from pcor_sql.service.analyst_service import DEFAULT_MAX_WORK, Service
from pcor_sql.service.http_plumbing import http_error, internal
from pcor_sql.service.openapi_document import document
from pcor_sql.service.owner_plane import AuditLog
from pcor_sql.service.request_schema import Limits

if TYPE_CHECKING:
    from pcor_sql.owner import Owner

__all__ = ["DEFAULT_MAX_WORK", "Service", "app"]


def app(owner: Owner, *, min_epsilon: float = pipeline.DEFAULT_MIN_EPSILON, max_keys: int = 100,
        max_body: int = 64 * 1024, max_text: int = 1000, workers: int = 4, max_work: int | None = DEFAULT_MAX_WORK,
        warm: bool = True, audit: AuditLog | None = None, processes: bool | None = None,
        duckdb_threads: int | str | None = "auto") -> Starlette:
    """The analyst service over `owner` (a `pcor_sql.Owner` on a DuckDB connection or a
    SparkSession, with its ledger) as an ASGI app: run it under uvicorn (`pcor-sql serve`), or
    mount it in the owner's own Starlette/FastAPI app. `min_epsilon`: the smallest ε per
    request; `max_keys`, `max_body` (bytes), `max_text` (characters): the input bounds;
    `workers`: how many requests run at once, each on its own cursor (more wait their turn);
    `max_work`: the most validity checks + EM candidates one request's search may use (None:
    no cap); `warm`: build the registered datasets' summaries on every worker at start-up;
    `audit`: where one line per request goes (`owner_plane.AuditLog`; default: memory only);
    `processes`: each worker's searches run in a search process of its own, started at start-up
    (`worker_pool`; DESIGN.md §10) — default: on Linux over DuckDB (a Spark owner's searches read
    windows through Spark and stay in the threads); `duckdb_threads`: DuckDB's `threads` while
    serving, once the summaries are built — "auto" (the default): its setting at start-up (every
    core, unless the owner lowered it) divided among the workers, at least 1; a whole number; or
    None: as it is. A summary built while serving (the table changed) raises it back for the
    build (`engine.build_threads.ServingThreads`). On 2 cores, two workers answered 5–10% more
    light requests a second on one DuckDB thread than on two (`python -m benchmarks service
    --duckdb-threads 1`; BENCHMARKS.md).
    `app.state.service.stop()` interrupts running requests (SIGTERM does it under `serve`)."""
    for name, value in (("max_keys", max_keys), ("max_body", max_body), ("max_text", max_text), ("workers", workers),
                        ("duckdb_threads", 1 if duckdb_threads in (None, "auto") else duckdb_threads)):
        if type(value) is not int or value < 1:
            raise UserError(f"{name} must be a whole number ≥ 1, got {value!r}", f"e.g. {name}=100")
    if max_work is not None and (type(max_work) is not int or max_work < 1):
        raise UserError(f"max_work must be a whole number ≥ 1 (or None: no cap), got {max_work!r}",
                        f"e.g. max_work={DEFAULT_MAX_WORK}")
    if type(min_epsilon) not in (int, float) or not (0 <= min_epsilon and math.isfinite(min_epsilon)):
        raise UserError(f"min_epsilon must be a finite number ≥ 0, got {min_epsilon!r}", "e.g. min_epsilon=0.01")
    from pcor_sql import __version__

    service = Service(owner, min_epsilon=min_epsilon, limits=Limits(max_keys, max_text, max_body), workers=workers,
                      max_work=max_work, audit=audit)
    service.document = document(service.limits, __version__, ANALYST_ENDPOINTS)

    if processes is None:
        processes = sys.platform.startswith("linux") and owner.session.access.engine == Engine.DUCKDB

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if processes:
            service.pool.start_processes()  # before any request: the lifespan waits for them
        if warm:
            await anyio.to_thread.run_sync(service.warm)
        if processes:
            await anyio.to_thread.run_sync(service.pool.share_summaries)
        if duckdb_threads is not None and owner.session.access.engine == Engine.DUCKDB:
            service.serve_threads(duckdb_threads)  # after the warm-up's builds: they used every core
        await anyio.to_thread.run_sync(service.watch.start)  # a shared ledger's revocations (DESIGN.md §11)
        try:
            yield
        finally:
            service.watch.stop()
            service.stop()
            service.pool.close()
            service.admission.close()
            service.audit.close()

    from pcor_sql.service.analyst_page import analyst_page_route

    # The analyst page (GET /) is the same JSON API in a browser: a token pasted, never stored.
    built = Starlette(routes=[service.route(e) for e in ANALYST_ENDPOINTS] + [analyst_page_route()], lifespan=lifespan,
                      exception_handlers={HTTPException: http_error, Exception: internal})
    built.router.redirect_slashes = False  # a redirect would be built from the Host header
    built.state.service = service
    return built
