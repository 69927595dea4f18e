"""The owner's listener (DESIGN.md §9): the owner's JSON API (`/v1/owner/...`), the console, a
health check and the owner's OpenAPI document — served on loopback only, on a port of its own,
and opened only by the owner token of the running service.

The routes are generated from `endpoint_table.OWNER_ENDPOINTS`, like the analysts' from theirs;
the handlers call `owner_plane.OwnerPlane` on the service's one Owner, so a revocation here is
a write to the same ledger every analyst request authenticates against: the next request with
that token gets 401, and a reservation racing it is re-checked by the ledger and refused.

`pcor-sql serve` makes a fresh owner token per run (a runtime file beside the database holds
it, readable by its OS user only: `runtime_file`); an analyst's token is refused here like any
wrong one, and the analysts' listener serves none of these paths.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
from typing import TYPE_CHECKING, Any, Callable

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from pcor_sql.service.analyst_identity import Identity, bearer_token
from pcor_sql.service.endpoint_table import OWNER_BODIES, OWNER_ERRORS, OWNER_PAGE, TOKEN, Caller, Endpoint, Query
from pcor_sql.service.http_plumbing import bound_route, error_response, health, http_error, internal, openapi
from pcor_sql.service.loopback import MISDIRECTED, loopback_host
from pcor_sql.service.openapi_document import document
from pcor_sql.service.owner_plane import OwnerPlane
from pcor_sql.service.request_schema import BadRequest, check, parse_body

if TYPE_CHECKING:
    from pcor_sql.service.analyst_service import Service

#: Runs an owner command of the CLI on the served file: argv → {exit_code, stdout, stderr, files}
#: (`files`: pictures it drew, for the caller to write), and for the audit line `command` (its
#: name and target) and `epsilon`.
Commands = Callable[[list[str]], dict[str, Any]]
OWNER = Identity("owner")


class OwnerService:
    """The owner's endpoints over the analysts' `Service` (its Owner, ledger, audit log)."""

    def __init__(self, service: Any, token: str, commands: Commands | None):
        self.service = service
        self.plane = OwnerPlane(service.owner, service.audit)
        self._token = token
        self.commands = commands
        #: Set by `owner_app` from `OWNER_ENDPOINTS` (declared below, beside the handlers).
        self.document: dict[str, Any] = {}

    def check_token(self, token: str) -> bool:
        """The owner token, compared in constant time."""
        return hmac.compare_digest(token.encode("utf-8", "replace"), self._token.encode("utf-8"))

    async def authenticate(self, header: str | None) -> Identity | None:
        token = bearer_token(header)
        return OWNER if token is not None and self.check_token(token) else None

    async def body(self, request: Request, schema: str) -> dict[str, Any]:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise BadRequest("the body must be application/json", "send Content-Type: application/json", 415)
        raw = await request.body()
        body = parse_body(raw, self.service.limits)
        check(body, OWNER_BODIES[schema], "the body")
        return body

    async def run(self, call: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(call)

    # ---- the endpoints (declared in `endpoint_table.OWNER_ENDPOINTS`) ----------------------

    async def analysts(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return {"analysts": await self.run(self.plane.analysts)}

    async def add_analyst(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        body = await self.body(request, "AnalystAdd")
        token = await self.run(lambda: self.plane.add_analyst(body["name"], body.get("quota"), body.get("notion"),
                                                              body.get("datasets")))
        return {"name": body["name"], "token": token}

    async def revoke(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        name = request.path_params["name"]
        return await self.run(lambda: self.plane.revoke(name))

    async def rotate(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        name = request.path_params["name"]
        return {"name": name, "token": await self.run(lambda: self.plane.rotate(name))}

    async def quota(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        name, body = request.path_params["name"], await self.body(request, "Quota")
        await self.run(lambda: self.plane.set_quota(name, body["epsilon"], body.get("notion"), body.get("dataset")))
        return {"name": name, "quota": body["epsilon"], "notion": body.get("notion"), "dataset": body.get("dataset")}

    async def datasets(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return {"datasets": await self.run(self.plane.datasets)}

    async def budget(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return {"budgets": await self.run(self.plane.units)}

    async def history(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return await self.run(lambda: self.plane.history(**params))

    async def spending(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return await self.run(lambda: self.plane.spending(params.get("by", "unit")))

    async def audit(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return {"audit": self.plane.audit.latest(params.get("limit", 100))}

    async def workers(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        return self.service.pool.status()

    async def command(self, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
        if self.commands is None:
            raise BadRequest("this service runs no owner commands (it was not started by `pcor-sql serve`)",
                             "use the /v1/owner endpoints")
        argv = (await self.body(request, "Command"))["argv"]
        if self.service.stopping.is_set():
            # Refused before it runs: the command then runs directly, once the file is free.
            raise BadRequest("the service is stopping", "run the command again: it will open the file directly", 503)
        ran = dict(await self.run(lambda: self.commands(list(argv))))  # type: ignore[misc]
        # The owner's action in the audit line (DESIGN.md §9): its name and target, its ε, its exit code.
        request.state.asked = {"command": ran.pop("command", None), "epsilon": ran.pop("epsilon", None),
                               "exit_code": ran.get("exit_code")}
        return {"exit_code": ran.get("exit_code", 1), "stdout": ran.get("stdout", ""), "stderr": ran.get("stderr", ""),
                "files": ran.get("files", [])}

    @property
    def stopping(self) -> threading.Event:
        """The analysts' service's: both listeners stop together."""
        return self.service.stopping


#: Every endpoint of the owner's JSON API: a row holds its handler and its schemas.
OWNER_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1/owner/analysts", OwnerService.analysts, Caller.OWNER, "Every analyst: quotas, spent, requests by outcome",
             {"type": "object"}, errors=OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts", OwnerService.add_analyst, Caller.OWNER, "Name an analyst; their token, shown once",
             TOKEN, body=("AnalystAdd",), errors=(*OWNER_ERRORS, "413", "415")),
    Endpoint("POST", "/v1/owner/analysts/{name}/revoke", OwnerService.revoke, Caller.OWNER,
             "Stop an analyst's token at once (requests already reserved finish and are recorded)", {"type": "object"},
             errors=OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts/{name}/rotate", OwnerService.rotate, Caller.OWNER,
             "A new token for an analyst, shown once; the old one stops at once; quotas and history stay", TOKEN,
             errors=OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts/{name}/quota", OwnerService.quota, Caller.OWNER,
             "Set (a number) or clear (null) an analyst's quota", {"type": "object"}, body=("Quota",),
             errors=(*OWNER_ERRORS, "413", "415")),
    Endpoint("GET", "/v1/owner/datasets", OwnerService.datasets, Caller.OWNER, "The registry: datasets, releasable keys, limits",
             {"type": "object"}, errors=OWNER_ERRORS),
    Endpoint("GET", "/v1/owner/budget", OwnerService.budget, Caller.OWNER, "Per unit and notion: spent, limit, releases",
             {"type": "object"}, errors=OWNER_ERRORS),
    Endpoint("GET", "/v1/owner/history", OwnerService.history, Caller.OWNER,
             "History rows, newest first: what was asked and its outcome (filtered, paged)", {"type": "object"},
             errors=OWNER_ERRORS, query=(
                 Query("analyst", {"type": "string", "maxLength": 64}, "only this analyst's rows"),
                 Query("dataset", {"type": "string", "maxLength": 128}, "only this dataset's rows"),
                 Query("outcome", {"type": "string", "enum": ["answered", "failed", "interrupted", "running",
                                                              "charged"]}, "only rows with this outcome"),
                 *OWNER_PAGE)),
    Endpoint("GET", "/v1/owner/spending", OwnerService.spending, Caller.OWNER, "ε spent over time, per unit or per analyst",
             {"type": "object"}, errors=OWNER_ERRORS,
             query=(Query("by", {"type": "string", "enum": ["unit", "analyst"], "default": "unit"}, "the grouping"),)),
    Endpoint("GET", "/v1/owner/audit", OwnerService.audit, Caller.OWNER, "The latest audit lines (one per request, never a token)",
             {"type": "object"}, errors=OWNER_ERRORS,
             query=(Query("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "lines"),)),
    Endpoint("GET", "/v1/owner/workers", OwnerService.workers, Caller.OWNER,
             "The workers now: each one's search process (pid, alive, forks, records searched) and the requests "
             "running and waiting", {"type": "object"}, errors=OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/command", OwnerService.command, Caller.OWNER,
             "Run an owner command of the CLI on the served file (what `pcor-sql analyst|dataset|budget ... --db FILE`, "
             "`explain-outlier`, `identify-anomaly` and `coe` send while the file is served): its exit code, stdout, "
             "stderr and the pictures it drew (base64, for the caller to write at their path)",
             {"type": "object", "properties": {
                 "exit_code": {"type": "integer"}, "stdout": {"type": "string"}, "stderr": {"type": "string"},
                 "files": {"type": "array", "items": {"type": "object", "properties": {
                     "path": {"type": "string"}, "data": {"type": "string", "contentEncoding": "base64"}}}}}},
             body=("Command",), errors=(*OWNER_ERRORS, "413", "415", "503")),
    Endpoint("GET", "/healthz", health, Caller.PUBLIC, "Whether the service is up (no token needed)",
             {"type": "object", "properties": {"status": {"type": "string"}}}, errors=("400",)),
    Endpoint("GET", "/v1/owner/openapi.json", openapi, Caller.PUBLIC, "This document", {"type": "object"},
             errors=("400",)),
)


def owner_app(service: Service, token: str, *, commands: Commands | None = None, console: bool = True) -> Starlette:
    """The owner's ASGI app over the analysts' `service` (`http_app.app(...).state.service`),
    opened by `token`. Serve it on loopback only (`listeners` does, for `pcor-sql serve`)."""
    from pcor_sql import __version__

    owner = OwnerService(service, token, commands)
    owner.document = document(service.limits, __version__, OWNER_ENDPOINTS, title="pcor-sql owner service",
                              extra_schemas=OWNER_BODIES)
    routes: list[Any] = [bound_route(e, owner, owner.authenticate, service.audit) for e in OWNER_ENDPOINTS]
    if console:
        routes += console_routes(owner)
    built = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: internal})
    built.router.redirect_slashes = False
    built.state.owner_service = owner
    return LoopbackOnly(built)


def console_routes(owner: OwnerService) -> list[Any]:
    """The console's pages (`console_app`), when that module is present."""
    try:
        from pcor_sql.service.console_app import console_routes as routes
    except ImportError:
        return []
    return routes(owner.plane, owner.check_token)


class LoopbackOnly:
    """Refuses any client that is not on loopback (the owner's listener binds 127.0.0.1 anyway:
    this holds even if it were mounted elsewhere), and any Host but a loopback name with this
    listener's port — 421, before anything else (DNS rebinding: `loopback`)."""

    def __init__(self, app: Starlette):
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client") or ("", 0)
            try:
                loopback = ipaddress.ip_address(client[0]).is_loopback
            except ValueError:
                loopback = client[0] in ("testclient", "localhost")
            if not loopback:
                response = error_response(403, "the owner's listener answers loopback only", "connect from this machine")
                await response(scope, receive, send)
                return
            if scope["type"] == "http" and not loopback_host(scope):
                response = error_response(421, *MISDIRECTED)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Listeners:
    """One ASGI app for two listeners: requests that arrived on the owner's socket (its local
    port, from the socket itself — never from a header) go to the owner's app, every other to
    the analysts'. The analysts' port so serves no owner path, whatever the request says."""

    def __init__(self, analysts: Starlette, owner: Starlette, owner_port: int):
        self.analysts, self.owner, self.owner_port = analysts, owner, owner_port
        self.state = analysts.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.analysts(scope, receive, send)
            return
        server = scope.get("server") or (None, None)
        target = self.owner if server[1] == self.owner_port else self.analysts
        await target(scope, receive, send)

