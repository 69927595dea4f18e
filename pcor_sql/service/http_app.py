"""The analyst service's HTTP API (DESIGN.md §8): a Starlette ASGI app over the owner's data.

    GET  /v1/datasets   the registered datasets this analyst may use (public by registration)
    POST /v1/explain    {dataset, keys, epsilon, verifier?, search?, samples?, utility?, start?, by?, ...}
    POST /v1/identify   {dataset, value, beta, radius, epsilon, privacy?, k?, norm?}
    POST /v1/cost       an explain or identify body → what it would charge (nothing charged)
    GET  /v1/me         this analyst's quotas and ε spent per notion
    GET  /v1/history    this analyst's own requests (paged: ?limit=N&before=RELEASE_ID)
    GET  /v1/releasable-keys  ?dataset=NAME&limit=N&offset=M: the keys one may ask about (public)
    GET  /healthz       whether the service is up (no token needed)
    GET  /openapi.json  the OpenAPI document (no token needed)

The paths, their handlers, who may call them and their schemas are one table
(`endpoint_table`); the routes here and the OpenAPI document are generated from it.

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
import copy
import math
import sys
import threading
from typing import Any, AsyncIterator, Callable

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pcor_sql import pipeline
from pcor_sql.core.choices import Engine
from pcor_sql.engine.build_threads import ServingThreads, duckdb_threads
from pcor_sql.analyst import OWNER_ONLY, Analyst
from pcor_sql.errors import Refused, UserError
from pcor_sql.jsonable import jsonable
from pcor_sql.ledger.admission_memory import AdmissionMemory, NotKept, kept_only
from pcor_sql.ledger.dataset_registry import RegisteredDataset, find_dataset, list_datasets
from pcor_sql.service import analyst_identity
from pcor_sql.service.analyst_identity import Identity
from pcor_sql.service.endpoint_table import ANALYST_ENDPOINTS, Endpoint
from pcor_sql.service.copy_check import copy_check
from pcor_sql.service.ledger_watch import IdentityWatch
from pcor_sql.service.http_plumbing import http_error, internal, make_route, ok
from pcor_sql.service.owner_plane import AuditLog
from pcor_sql.service.openapi_document import document
from pcor_sql.service.request_schema import BadRequest, Limits, check, explain_schema, identify_schema, parse_body
from pcor_sql.service.worker_pool import WorkerPool
from pcor_sql.session import Session

DEFAULT_MAX_WORK = pipeline.DEFAULT_MAX_WORK


class Service:
    """The app's state: the owner's handle, the worker Sessions, the limits and the schemas."""

    def __init__(self, owner: Any, *, min_epsilon: float, limits: Limits, workers: int, max_work: int | None,
                 audit: AuditLog | None = None):
        from pcor_sql import __version__

        self.owner = owner
        self.ledger = owner.ledger
        #: Registered datasets this host's copy may not serve (DESIGN.md §11 "Units across hosts"):
        #: name → `fingerprints.CopyRefusal`; to analysts they are as unregistered.
        self.refused = copy_check(owner)
        self.min_epsilon = float(min_epsilon)
        self.limits = limits
        self.max_work = max_work
        self.workers = workers
        #: Set when the service stops: running searches end at their next unit of work.
        self.stopping = threading.Event()
        self.pool = WorkerPool(owner, workers)
        self.admission = WorkerPool(owner, ADMISSION)
        #: The admissions tried on the event loop use it: its data access refuses every use.
        self.kept_session = self.admission.sessions()[0].reading_nothing()
        #: What admissions read, kept per analyst: it admits without reading, never refuses.
        self.memory = AdmissionMemory()
        #: The identities it authenticated, kept until an analyst is added, revoked or re-tokened.
        self.identities = analyst_identity.IdentityMemory()
        #: Another process's revocation on a shared ledger invalidates both memories (`ledger_watch`).
        self.watch = IdentityWatch(self.ledger, self.forget_identities)
        self.explain_schema = explain_schema(limits)
        self.identify_schema = identify_schema(limits)
        self.document = document(limits, __version__)
        #: One line per request (`--audit-log`), shared with the owner's listener.
        self.audit = audit or AuditLog()

    def forget_identities(self) -> None:
        """Drop the kept identities and admissions: another process changed the analysts."""
        from pcor_sql.ledger.analysts import changed_elsewhere

        changed_elsewhere()
        self.memory.clear()

    def stop(self) -> None:
        """Interrupt every running request at its next unit of work (recorded as interrupted)."""
        self.stopping.set()

    # ---- the plumbing every endpoint shares ----------------------------------------------

    def route(self, endpoint: Endpoint) -> Route:
        return make_route(endpoint, getattr(self, endpoint.handler), self.authenticate, self.audit)

    async def authenticate(self, header: str | None) -> Identity | None:
        kept = self.identities.get(header)
        if kept is not None:
            return kept
        return await anyio.to_thread.run_sync(self.identities.read, self.ledger, header)

    async def body(self, request: Request) -> dict[str, Any]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequest("the body must be application/json", "send Content-Type: application/json", 415)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limits.max_body:
            raise BadRequest(f"the body is larger than {self.limits.max_body} bytes", "send a smaller request", 413)
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.limits.max_body:
                raise BadRequest(f"the body is larger than {self.limits.max_body} bytes", "send a smaller request", 413)
        body = parse_body(bytes(raw), self.limits)
        # An owner's option is a 403 (the trust model), not an unknown field (DESIGN.md §6).
        owners = sorted(set(body) & (OWNER_ONLY - BODY_WORDS))
        if owners:
            raise Refused(f"{owners[0]} is the data owner's option", f"drop {owners[0]}")
        return body

    def analyst(self, session: Session, identity: Identity, found: RegisteredDataset | None = None, *,
                admission: AdmissionMemory | None = None) -> Analyst:
        """The analyst handle for this request: the pipeline's analyst policy, paid from this
        analyst's quota, on the worker's own Session, its work capped. `found`: the registered
        dataset this request names, as `require_visible` read it (read once per request);
        `admission`: the memory an admission may answer from."""
        policy = pipeline.analyst_policy(identity.name, min_epsilon=self.min_epsilon, max_work=self.max_work,
                                         stop=self.stopping)
        return Analyst(self.owner, policy, session=session, registry={found.name: found} if found else None,
                       admission=admission)

    def visible(self, identity: Identity) -> list[Any]:
        return [d for d in self.served() if identity.datasets is None or d.name in identity.datasets]

    def served(self) -> list[Any]:
        """The registered datasets this service serves (all but those its copy may not)."""
        return [d for d in list_datasets(self.ledger) if d.name not in self.refused]

    def require_visible(self, identity: Identity, name: str, memory: AdmissionMemory | None = None) -> RegisteredDataset:
        """The registered dataset `name`, if this analyst may use it: one message for a dataset
        that does not exist and one this analyst may not use (one row read when it passes, or
        none when `memory` kept it)."""
        allowed = (identity.datasets is None or name in identity.datasets) and name not in self.refused
        read = lambda: find_dataset(self.ledger, name)  # noqa: E731
        found = (read() if memory is None else memory.dataset(identity.name, name, read)) if allowed else None
        if found is None:
            names = [d.name for d in self.visible(identity)]
            raise Refused(f"no dataset {name[:NAME]!r} among those you may use", f"yours: {', '.join(names) or 'none'}")
        return found

    def queued(self) -> int:
        """Requests waiting now for a worker (each in their analyst's own line)."""
        return self.pool.load()[1]

    async def run(self, identity: Identity, dataset: str, call: Callable[[Analyst], Any], *,
                  pool: WorkerPool | None = None, memory: AdmissionMemory | None = None) -> Any:
        def work(session: Session) -> Any:
            found = self.require_visible(identity, dataset, memory)
            return call(self.analyst(session, identity, found, admission=memory))

        if pool is not None:
            return await pool.run(work)
        return await self.pool.run(work, identity.name)

    def admitted_from_memory(self, identity: Identity, dataset: str, admit: Callable[[Analyst], Any]) -> bool:
        """`admit` here, on the event loop, when all it needs is kept: True when it admitted; False
        when it would read (then nothing happened). A refusal that needs no read raises here."""
        try:
            with kept_only():
                found = self.require_visible(identity, dataset, self.memory)
                admit(self.analyst(self.kept_session, identity, found, admission=self.memory))
            return True
        except NotKept:
            return False

    def would_wait(self, name: str) -> bool:
        """Whether a request of analyst `name` would wait now: every worker busy or others waiting
        for one."""
        running, waiting = self.pool.load()
        return running >= self.workers or waiting > 0

    async def answer(self, identity: Identity, method: str, dataset: str, target: Any, options: dict[str, Any]) -> Any:
        """`Analyst.<method>(dataset, target, **options)` on a worker, admitted first if it would
        wait (see the module docstring): a refusal that needs no data comes from the admission,
        without waiting; a request that finds a worker free goes to it, which checks the same."""
        if self.would_wait(identity.name):
            admit = lambda a: a.admit(method, dataset, copy.deepcopy(target), **copy.deepcopy(options))  # noqa: E731
            if not self.admitted_from_memory(identity, dataset, admit):
                await self.run(identity, dataset, admit, pool=self.admission, memory=self.memory)
        try:
            return await self.run(identity, dataset, lambda a: getattr(a, method)(dataset, target, **options))
        except UserError:
            self.memory.forget(identity.name)  # perhaps admitted from what is no longer so: read afresh next time
            raise

    # ---- the endpoints (declared in `endpoint_table`) -------------------------------------

    async def datasets(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        found = await anyio.to_thread.run_sync(self.visible, identity)
        return {"datasets": [{"name": d.name, "key": d.key, "metrics": list(d.metrics), "attributes": list(d.attributes),
                              "domains": {a: list(v) for a, v in d.domains}, "releasable_keys": d.releasable,
                              "accounting": d.accounting} for d in found]}

    async def explain(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        body = await self.body(request)
        check(body, self.explain_schema, "the body")
        dataset, keys = body.pop("dataset"), body.pop("keys")
        request.state.asked = {"dataset": dataset, "epsilon": body.get("epsilon"), "keys": len(keys)}
        results = await self.answer(identity, "explain_outliers", dataset, keys, body)
        return {"results": [jsonable(r.as_dict()) for r in results]}

    async def identify(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        body = await self.body(request)
        check(body, self.identify_schema, "the body")
        dataset, value = body.pop("dataset"), body.pop("value")
        request.state.asked = {"dataset": dataset, "epsilon": body.get("epsilon"), "keys": 1}
        answer = await self.answer(identity, "identify_value", dataset, value, body)
        shown = jsonable(answer.as_dict())
        shown["value"] = shown.pop("key")
        return {"results": [shown]}

    async def cost(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        body = await self.body(request)
        if ("keys" in body) == ("value" in body):
            raise BadRequest("a cost body is an explain body (with keys) or an identify body (with value)",
                             "send the body you would send to /v1/explain or /v1/identify")
        by_key = "keys" in body
        check(body, self.explain_schema if by_key else self.identify_schema, "the body")
        dataset, target = body.pop("dataset"), body.pop("keys" if by_key else "value")
        method = "explain_outliers" if by_key else "identify_value"
        found = await self.run(identity, dataset, lambda a: a.cost(method, dataset, target, **body), pool=self.admission)
        return {"dataset": dataset, **found.as_dict()}

    async def me(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        usage = await anyio.to_thread.run_sync(analyst_identity.usage, self.ledger, identity.name)
        return {"analyst": identity.name, "datasets": None if identity.datasets is None else list(identity.datasets),
                "min_epsilon": self.min_epsilon, "max_keys": self.limits.max_keys, "max_work": self.max_work,
                "usage": usage}

    async def releasable_keys(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        if "dataset" not in params:
            raise BadRequest("no dataset given", "e.g. /v1/releasable-keys?dataset=salaries")
        dataset, limit, offset = params["dataset"], params.get("limit", 100), params.get("offset", 0)
        return await self.run(identity, dataset, lambda a: a.releasable_keys(dataset, limit=limit, offset=offset),
                              pool=self.admission)

    async def history(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        limit, before = params.get("limit", 100), params.get("before")
        rows = await anyio.to_thread.run_sync(analyst_identity.history, self.ledger, identity.name, limit, before)
        return {"history": rows}

    async def health(self, request: Request, params: dict[str, Any]) -> Response:
        return ok({"status": "stopping" if self.stopping.is_set() else "ok"})

    async def openapi(self, request: Request, params: dict[str, Any]) -> Response:
        return ok(self.document)

    def serve_threads(self, asked: int | str) -> None:
        """DuckDB's threads from now on (`app(duckdb_threads=...)`); every summary build raises them back."""
        building = duckdb_threads(self.owner.con)
        serving = max(1, building // self.workers) if asked == "auto" else int(asked)
        threads = ServingThreads(self.owner.con, serving, building)
        for session in [self.owner.session, *self.pool.sessions(), *self.admission.sessions()]:
            session.building = threads.building

    def warm(self) -> None:
        """Build every registered dataset's summary on every worker before serving (see the module
        docstring): a first request is then as fast for everyone."""
        from pcor_sql.analyst import warm_session

        datasets = self.served()
        for session in self.pool.sessions():
            for dataset in datasets:
                warm_session(session, dataset)


NAME = 128
#: Body fields of the analyst's own (the owner's `dataset` option, the ledger name to charge, is
#: spelled like the body's registered dataset and is never an analyst's).
BODY_WORDS = frozenset({"dataset"})
#: Cursors that admit requests (`Service.answer`): a check takes milliseconds, so two keep up with many workers.
ADMISSION = 2


def app(owner: Any, *, min_epsilon: float = pipeline.DEFAULT_MIN_EPSILON, max_keys: int = 100,
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
    service = Service(owner, min_epsilon=min_epsilon, limits=Limits(max_keys, max_text, max_body), workers=workers,
                      max_work=max_work, audit=audit)

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
