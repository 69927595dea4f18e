"""What every response and every request of the service goes through (DESIGN.md §8): JSON
bodies any client can read, `{error, fix}` errors, `no-store`, exact paths, the checks of the
query string and of the Authorization header, and an access log that never holds a token.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcor_sql.errors import BudgetExceeded, Interrupted, LedgerUnreachable, Refused, RequestFailed, UserError
from pcor_sql.pipeline import failed
from pcor_sql.service.endpoint_table import Caller, Endpoint
from pcor_sql.service.request_schema import BadRequest, check, text

LOG = logging.getLogger("pcor_sql.service")
ACCESS = logging.getLogger("pcor_sql.service.access")
HEADERS = {"Cache-Control": "no-store"}
#: Every 401 of the analysts' listener: one text whether the token is missing, malformed, unknown,
#: revoked or replaced by a rotation (DESIGN.md §8), so it says what helps in each case.
UNAUTHORIZED = ("not authenticated: the token is missing or not valid (unknown, revoked or replaced by a new one)",
                "send Authorization: Bearer <token> with the token your data owner gave you; if it stopped "
                "working, ask the data owner for a new one")
#: The owner's listener: the owner token is the running service's own (DESIGN.md §9).
OWNER_UNAUTHORIZED = ("not authenticated: the owner token is missing or not this service's",
                      "send Authorization: Bearer <owner token>, read from the runtime file beside the database "
                      "or from serve's --owner-token-file (a restarted service has a new one)")
#: Query parameter names that carry a token in other APIs: refused by name, whatever the endpoint.
TOKEN_NAMES = frozenset({"token", "access_token", "auth", "authorization", "bearer", "api_key", "apikey", "key"})


class Json(JSONResponse):
    """JSON as ASCII: every character outside it is a `\\u` escape, so a lone surrogate that
    reached an error text can never make writing the response fail."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def ok(content: Any) -> Response:
    return Json(content, headers=HEADERS)


def error_response(status: int, problem: str, fix: str | None, headers: dict[str, str] | None = None) -> Response:
    out = {**HEADERS, **(headers or {})}
    if status == 401:
        out["WWW-Authenticate"] = "Bearer"
    return Json({"error": problem, "fix": fix or ""}, status_code=status, headers=out)


def status_of(exc: UserError) -> int:
    """The HTTP code of a refusal (see `endpoint_table.ERRORS`)."""
    if isinstance(exc, BadRequest):
        return exc.status
    if isinstance(exc, RequestFailed):
        return 422
    if isinstance(exc, BudgetExceeded):
        return 429
    if isinstance(exc, Refused):
        return 403
    return 400


def check_request(request: Request, endpoint: Endpoint) -> dict[str, Any]:
    """The query parameters `endpoint` declares, checked (400 otherwise), and one Authorization
    header at most. A token in the query string is refused by name — it would sit in proxies'
    and servers' logs — and this service's own access log never writes a query string."""
    if len(request.headers.getlist("authorization")) > 1:
        raise BadRequest("the request has two Authorization headers", "send exactly one: Authorization: Bearer <token>")
    params: dict[str, Any] = {}
    declared = {q.name: q for q in endpoint.query}
    for name, value in request.query_params.multi_items():
        if name.lower() in TOKEN_NAMES and name not in declared:
            raise BadRequest("a token in the query string is refused (it would be written to logs)",
                             "send it in the Authorization header: Authorization: Bearer <token>")
        text(name, "a query parameter name")
        if name not in declared:
            allowed = ", ".join(sorted(declared)) or "none"
            raise BadRequest(f"unknown query parameter {name[:40]!r}", f"this path takes: {allowed}")
        if name in params:
            raise BadRequest(f"the query parameter {name!r} is given twice", "give it once")
        schema = declared[name].schema
        if schema["type"] == "integer":
            if not value.isdigit() or len(value) > 18:
                raise BadRequest(f"{name} must be a whole number", f"e.g. ?{name}={schema.get('default', 10)}")
            params[name] = int(value)
        else:
            params[name] = value
        check(params[name], schema, name)
    return params


def access_line(request: Request, status: int, started: float, analyst: str | None) -> None:
    """One access-log line: method, path (never the query string), status, who, latency."""
    ACCESS.info("%s %s %d analyst=%s %.1fms", request.method, request.url.path, status, analyst or "-",
                (time.perf_counter() - started) * 1000)


async def http_error(request: Request, exc: Exception) -> Response:
    """404 and 405 (with Allow) as `{error, fix}`: paths are exact, never redirected."""
    status = getattr(exc, "status_code", 500)
    fixes = {404: "see GET /openapi.json for the paths (exact: no trailing slash)",
             405: "see GET /openapi.json for each path's method"}
    problem = str(getattr(exc, "detail", "")) or "error"
    headers = dict(getattr(exc, "headers", None) or {})
    return error_response(status, problem.lower(), fixes.get(status, "see GET /openapi.json"),
                          {k: v for k, v in headers.items() if k.lower() == "allow"})


async def internal(request: Request, exc: Exception) -> Response:
    LOG.error("internal error in %s: %s", request.url.path, type(exc).__name__, exc_info=True)
    return error_response(500, "internal error", "retry later; the data owner can read the service log")


#: What each status means for the audit log's `outcome` (a 200 was answered; a 422 failed after
#: its charge; a 503 was interrupted by a stop; any other 4xx was refused before any charge).
_OUTCOMES = {200: "answered", 422: "failed", 503: "interrupted", 401: "unauthenticated"}


class Listener(Protocol):
    """What the public endpoints read of a listener's service: whether it is stopping, and its
    OpenAPI document."""

    stopping: threading.Event
    document: dict[str, Any]


async def health(listener: Listener, request: Request, params: dict[str, Any]) -> Response:
    """`GET /healthz` of either listener: whether the service is up (no token needed)."""
    return ok({"status": "stopping" if listener.stopping.is_set() else "ok"})


async def openapi(listener: Listener, request: Request, params: dict[str, Any]) -> Response:
    """The listener's OpenAPI document (no token needed)."""
    return ok(listener.document)


def bound_route(endpoint: Endpoint, listener: Any, authenticate: Callable[[str | None], Awaitable[Any]],
                audit: Any = None) -> Route:
    """`make_route` with the row's handler bound to `listener`, the service object it answers for."""
    return make_route(endpoint, functools.partial(endpoint.handler, listener), authenticate, audit)


def make_route(endpoint: Endpoint, handler: Callable[..., Awaitable[Any]],
               authenticate: Callable[[str | None], Awaitable[Any]], audit: Any = None) -> Route:
    """The route of `endpoint`: the query and header checks, the token (unless public), the
    handler, errors as `{error, fix}`, one access-log line and — for a caller's request — one
    audit line (`owner_plane.AuditLog`: never a token, never a query string)."""

    async def handle(request: Request) -> Response:
        started, who = time.perf_counter(), None
        try:
            params = check_request(request, endpoint)
            if endpoint.caller is Caller.PUBLIC:
                response = await handler(request, params)
            else:
                identity = await authenticate(request.headers.get("authorization"))
                if identity is None:
                    response = error_response(401, *(OWNER_UNAUTHORIZED if endpoint.caller is Caller.OWNER
                                                      else UNAUTHORIZED))
                else:
                    who = identity.name
                    response = ok(await handler(request, identity, params))
        except LedgerUnreachable as exc:  # DESIGN.md §11 "Faults": an analyst gets the generic refusal
            generic = failed() if endpoint.caller is not Caller.OWNER else exc
            response = error_response(422 if generic is not exc else 503, generic.problem, generic.fix)
        except UserError as exc:
            response = error_response(status_of(exc), exc.problem, exc.fix)
        except (Interrupted, KeyboardInterrupt):  # the service is stopping (`core.work.Stopping`)
            response = error_response(503, "the service is stopping: the request was interrupted",
                                      "ask again when the service is back (the history shows it as interrupted)")
        except Exception as exc:  # a bug: logged for the owner, never shown to the caller
            response = await internal(request, exc)
        access_line(request, response.status_code, started, who)
        if audit is not None and endpoint.caller is not Caller.PUBLIC:
            asked = getattr(request.state, "asked", {})
            status = response.status_code
            audit.write({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "caller": endpoint.caller.value,
                         "analyst": who, "endpoint": f"{request.method} {request.url.path}",
                         "dataset": asked.get("dataset"), "epsilon": asked.get("epsilon"), "keys": asked.get("keys"),
                         "outcome": _OUTCOMES.get(status, "refused" if status < 500 else "error"), "status": status,
                         "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                         # An owner's command: its name and target, and how it ended (DESIGN.md §9).
                         **{k: asked[k] for k in ("command", "exit_code") if asked.get(k) is not None}})
        return response

    return Route(endpoint.path, handle, methods=[endpoint.method])
