"""The analyst service's HTTP API (DESIGN.md §8): a Starlette ASGI app over the owner's data.

    GET  /v1/datasets   the registered datasets this analyst may use (public by registration)
    POST /v1/explain    {dataset, keys, epsilon, verifier?, search?, samples?, utility?, start?, by?, ...}
    POST /v1/identify   {dataset, value, beta, radius, epsilon, privacy?, k?, norm?}
    POST /v1/cost       an explain or identify body → what it would charge (nothing charged)
    GET  /v1/me         this analyst's quotas and ε spent per notion
    GET  /v1/history    this analyst's own requests
    GET  /openapi.json  the OpenAPI document (no token needed)

Every request but the document needs `Authorization: Bearer <token>`; a missing, malformed,
unknown or revoked token gets one 401 with one body. A body is JSON checked by exact type and
size against the schema generated from the option specs (`request_schema`) before anything
else. Then the request runs through `pcor_sql.analyst.Analyst` — the pipeline's analyst policy,
the same code as in-process: reserve, then read; results in the order of the keys given.

Errors are `{"error": ..., "fix": ...}`, never a traceback: 400 bad input, 403 refused by the
trust model, 413/415 body too large / not JSON, 429 quota or limit reached — all before the
reservation, nothing charged — and 422, the one generic failure after it (charged). Every
response is `Cache-Control: no-store`. A refusal names nothing the analyst did not send or own:
a limit reached is one message whether it is their quota or a unit's (`pipeline.limit_reached`).

Refusals do not wait for a worker. A request is first admitted (`Analyst.admit`: the request's
checks, which read only the request and the registry, then its cost against the dataset's
limits and the analyst's quota — a few small ledger reads; no row read, nothing charged) on a
small pool of its own cursors, so a refusal comes back while the workers are busy with releases.
Admission decides nothing else: the worker runs the request from the start, and its
reservation, atomic, alone decides what is charged — two requests admitted together near a
quota get one charge and one 429, never an overspend.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcor_sql import pipeline
from pcor_sql.analyst import Analyst
from pcor_sql.errors import BudgetExceeded, Refused, RequestFailed, UserError
from pcor_sql.ledger.dataset_registry import list_datasets
from pcor_sql.service import analyst_identity
from pcor_sql.service.analyst_identity import Identity, plain
from pcor_sql.service.openapi_document import document
from pcor_sql.service.request_schema import BadRequest, Limits, check, explain_schema, identify_schema, parse_body
from pcor_sql.service.worker_pool import WorkerPool

LOG = logging.getLogger("pcor_sql.service")
HEADERS = {"Cache-Control": "no-store"}
UNAUTHORIZED = {"error": "not authenticated", "fix": "send Authorization: Bearer <your token>"}


def error_response(status: int, problem: str, fix: str | None) -> JSONResponse:
    headers = dict(HEADERS)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse({"error": problem, "fix": fix or ""}, status_code=status, headers=headers)


def status_of(exc: UserError) -> int:
    """The HTTP code of a refusal (see the module docstring)."""
    if isinstance(exc, BadRequest):
        return exc.status
    if isinstance(exc, RequestFailed):
        return 422
    if isinstance(exc, BudgetExceeded):
        return 429
    if isinstance(exc, Refused):
        return 403
    return 400


class Service:
    """The app's state: the owner's handle, the worker Sessions, the limits and the schemas."""

    def __init__(self, owner: Any, *, min_epsilon: float, limits: Limits, workers: int):
        from pcor_sql import __version__

        self.owner = owner
        self.ledger = owner.ledger
        self.min_epsilon = float(min_epsilon)
        self.limits = limits
        self.pool = WorkerPool(owner, workers)
        self.admission = WorkerPool(owner, ADMISSION)
        self.explain_schema = explain_schema(limits)
        self.identify_schema = identify_schema(limits)
        self.document = document(limits, __version__)

    # ---- the plumbing every endpoint shares ----------------------------------------------

    def endpoint(self, work: Callable[[Request, Identity], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                identity = await anyio.to_thread.run_sync(
                    analyst_identity.authenticate_header, self.ledger, request.headers.get("authorization"))
                if identity is None:
                    return error_response(401, UNAUTHORIZED["error"], UNAUTHORIZED["fix"])
                return JSONResponse(await work(request, identity), headers=HEADERS)
            except UserError as exc:
                return error_response(status_of(exc), exc.problem, exc.fix)
            except Exception as exc:  # a bug: logged for the owner, never shown to the analyst
                LOG.error("internal error in %s: %s", request.url.path, type(exc).__name__, exc_info=True)
                return error_response(500, "internal error", "retry later; the data owner can read the service log")

        return handle

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
        return parse_body(bytes(raw), self.limits)

    def analyst(self, session: Any, identity: Identity) -> Analyst:
        """The analyst handle for this request: the pipeline's analyst policy, paid from this
        analyst's quota, on the worker's own Session."""
        policy = pipeline.analyst_policy(identity.name, min_epsilon=self.min_epsilon)
        return Analyst(self.owner, policy, session=session)

    def visible(self, identity: Identity) -> list[Any]:
        return [d for d in list_datasets(self.ledger) if identity.datasets is None or d.name in identity.datasets]

    def require_visible(self, identity: Identity, name: str) -> None:
        """One message for a dataset that does not exist and one this analyst may not use."""
        names = [d.name for d in self.visible(identity)]
        if name not in names:
            raise Refused(f"no dataset {name[:NAME]!r} among those you may use", f"yours: {', '.join(names) or 'none'}")

    async def run(self, identity: Identity, dataset: str, call: Callable[[Analyst], Any], *,
                  pool: WorkerPool | None = None) -> Any:
        def work(session: Any) -> Any:
            self.require_visible(identity, dataset)
            return call(self.analyst(session, identity))

        return await (pool or self.pool).run(work)

    async def answer(self, identity: Identity, method: str, dataset: str, target: Any, options: dict[str, Any]) -> Any:
        """`Analyst.<method>(dataset, target, **options)` on a worker, once admitted (see the module
        docstring): a refusal that needs no data comes from the admission, without waiting."""
        await self.run(identity, dataset, lambda a: a.admit(method, dataset, copy.deepcopy(target),
                                                            **copy.deepcopy(options)), pool=self.admission)
        return await self.run(identity, dataset, lambda a: getattr(a, method)(dataset, target, **options))

    # ---- the endpoints -------------------------------------------------------------------

    async def datasets(self, request: Request, identity: Identity) -> Any:
        found = await anyio.to_thread.run_sync(self.visible, identity)
        return {"datasets": [{"name": d.name, "key": d.key, "metrics": list(d.metrics), "attributes": list(d.attributes),
                              "domains": {a: list(v) for a, v in d.domains}, "releasable_keys": d.releasable,
                              "accounting": d.accounting} for d in found]}

    async def explain(self, request: Request, identity: Identity) -> Any:
        body = await self.body(request)
        check(body, self.explain_schema, "the body")
        dataset, keys = body.pop("dataset"), body.pop("keys")
        results = await self.answer(identity, "explain_outliers", dataset, keys, body)
        return {"results": [plain(r.as_dict()) for r in results]}

    async def identify(self, request: Request, identity: Identity) -> Any:
        body = await self.body(request)
        check(body, self.identify_schema, "the body")
        dataset, value = body.pop("dataset"), body.pop("value")
        answer = await self.answer(identity, "identify_value", dataset, value, body)
        shown = plain(answer.as_dict())
        shown["value"] = shown.pop("key")
        return {"results": [shown]}

    async def cost(self, request: Request, identity: Identity) -> Any:
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

    async def me(self, request: Request, identity: Identity) -> Any:
        usage = await anyio.to_thread.run_sync(analyst_identity.usage, self.ledger, identity.name)
        return {"analyst": identity.name, "datasets": None if identity.datasets is None else list(identity.datasets),
                "min_epsilon": self.min_epsilon, "max_keys": self.limits.max_keys, "usage": usage}

    async def history(self, request: Request, identity: Identity) -> Any:
        rows = await anyio.to_thread.run_sync(analyst_identity.history, self.ledger, identity.name)
        return {"history": rows}

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(self.document, headers=HEADERS)


NAME = 128
#: Cursors that admit requests (`Service.answer`): a check takes milliseconds, so two keep up with many workers.
ADMISSION = 2


async def _http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    fixes = {404: "see GET /openapi.json for the paths", 405: "see GET /openapi.json for each path's method"}
    problem = str(getattr(exc, "detail", "")) or "error"
    return error_response(status, problem.lower(), fixes.get(status, "see GET /openapi.json"))


async def _internal(request: Request, exc: Exception) -> Response:
    LOG.error("internal error in %s: %s", request.url.path, type(exc).__name__, exc_info=True)
    return error_response(500, "internal error", "retry later; the data owner can read the service log")


def app(owner: Any, *, min_epsilon: float = pipeline.DEFAULT_MIN_EPSILON, max_keys: int = 100,
        max_body: int = 64 * 1024, max_text: int = 1000, workers: int = 4) -> Starlette:
    """The analyst service over `owner` (a `pcor_sql.Owner` on a DuckDB connection or a
    SparkSession, with its ledger) as an ASGI app: run it under uvicorn (`pcor-sql serve`), or
    mount it in the owner's own Starlette/FastAPI app. `min_epsilon`: the smallest ε per
    request; `max_keys`, `max_body` (bytes), `max_text` (characters): the input bounds;
    `workers`: how many requests run at once, each on its own cursor (more wait their turn)."""
    for name, value in (("max_keys", max_keys), ("max_body", max_body), ("max_text", max_text), ("workers", workers)):
        if type(value) is not int or value < 1:
            raise UserError(f"{name} must be a whole number ≥ 1, got {value!r}", f"e.g. {name}=100")
    if type(min_epsilon) not in (int, float) or not 0 <= min_epsilon < float("inf"):
        raise UserError(f"min_epsilon must be a finite number ≥ 0, got {min_epsilon!r}", "e.g. min_epsilon=0.01")
    service = Service(owner, min_epsilon=min_epsilon, limits=Limits(max_keys, max_text, max_body), workers=workers)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.pool.close()
            service.admission.close()

    routes = [
        Route("/v1/datasets", service.endpoint(service.datasets), methods=["GET"]),
        Route("/v1/explain", service.endpoint(service.explain), methods=["POST"]),
        Route("/v1/identify", service.endpoint(service.identify), methods=["POST"]),
        Route("/v1/cost", service.endpoint(service.cost), methods=["POST"]),
        Route("/v1/me", service.endpoint(service.me), methods=["GET"]),
        Route("/v1/history", service.endpoint(service.history), methods=["GET"]),
        Route("/openapi.json", service.openapi, methods=["GET"]),
    ]
    built = Starlette(routes=routes, lifespan=lifespan,
                      exception_handlers={HTTPException: _http_error, Exception: _internal})
    built.state.service = service
    return built
