"""The owner console (DESIGN.md §9): server-rendered pages at `/console` on the owner's loopback
listener, over the owner plane (`owner_plane.OwnerPlane`) — the same reads and commands as the
owner's JSON API.

Log in with the owner token (a form field named `token`) at `/console/login`: the service keeps a
session (a random id → a random path key and a CSRF token) and sends the browser to the
session's pages, `/console/<key>/...`, setting the id as an HttpOnly, SameSite=Strict cookie
scoped to that path. Every page but the login form needs that session on its own path (the
cookie alone opens nothing elsewhere); every POST but the login needs the session AND the form's
CSRF token, and a POST whose Origin (or Sec-Fetch-Site) says it came from another site is
refused before anything else — a cross-site form post or a replayed form without its token does
nothing.

Why the path (DESIGN.md §9 "Secrets on disk and in the browser"): browsers do not isolate
cookies by port, and 127.0.0.1 on another port is even the same *site*, so SameSite does not
help. A cookie scoped to `/console` would go to any process listening on another loopback port
that the owner's browser visits at `/console/...`, which could replay it here. A cookie scoped to
an unguessable path (the key: 192 random bits, known only to the browser that logged in) is sent
only to URLs under that path, which such a process cannot name; and the cookie without its key,
or a key without its cookie, opens nothing.

Every response is `no-store`, framed by nobody (X-Frame-Options DENY, frame-ancestors 'none'),
and under a Content-Security-Policy that forbids scripts and every outside origin: the pages
have no script, inline CSS, and charts drawn as inline SVG (`console_charts`).

The cookie is `Secure` when the listener serves HTTPS (`serve --ssl-certfile`); on plain HTTP,
where a browser would drop a Secure cookie, the owner listener is on loopback and the cookie
never leaves the machine.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pcor_sql.core.option_spec import StrEnum
from pcor_sql.errors import UserError
from pcor_sql.service import console_pages as pages
from pcor_sql.service.console_sessions import (
    COOKIE, LIFETIME, LOG, LOGIN, PAGE, SESSION, ConsoleSession, ConsoleSessions, base_of, form, html, redirect,
    refused, said, same_origin,
)
from pcor_sql.service.owner_plane import OUTCOMES, OwnerPlane


class Access(StrEnum):
    """What a console route needs: nothing (the login form and the entry, which only send the
    browser on), the session (a page: its cookie on its own path), or the session and the form's
    CSRF token from this console's own origin (a form that acts)."""

    OPEN = "open"
    PAGE = "page"
    FORM = "form"


@dataclass(frozen=True)
class ConsoleEndpoint:
    """One route of the console, declared once (as `endpoint_table.Endpoint` declares the JSON
    API's): method, path, the handler (a method of `Console`), what it needs, what it does."""

    method: str
    path: str
    handler: Callable[..., Awaitable[Response]]
    access: Access
    summary: str


class Console:
    """The console's handlers over the owner plane: the same reads and commands as the owner's
    JSON API (`owner_app.OwnerService`). `check_token(text)` says whether `text` is the owner
    token (an analyst's is not)."""

    def __init__(self, plane: OwnerPlane, check_token: Callable[[str], bool]):
        self.plane, self.check_token, self.sessions = plane, check_token, ConsoleSessions()

    @staticmethod
    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def session_of(self, request: Request) -> ConsoleSession | None:
        return self.sessions.get(request.cookies.get(COOKIE), request.path_params.get("key"))

    # ---- open: no session needed ---------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        return html(pages.login_page())  # no session cookie is ever sent here (it is scoped to its path)

    async def login(self, request: Request) -> Response:
        if not same_origin(request):
            return refused("a form posted from another site is refused")
        try:
            token = (await form(request)).get("token", "").strip()
        except UserError as exc:
            return refused(said(exc))
        if not token or not self.check_token(token):
            return html(pages.login_page("That is not the owner token (an analyst's token does not open the"
                                         " console)."), 401)
        sid, session = self.sessions.open()  # a fresh id and key at every login: a planted id is never promoted
        response = redirect(base_of(session))
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path=base_of(session),
                            max_age=int(LIFETIME), secure=request.url.scheme == "https")
        return response

    async def entry(self, request: Request) -> Response:
        return redirect(LOGIN)  # the session's pages are under its own key, which only its browser knows

    # ---- pages: the session on its own path ------------------------------------------------

    @staticmethod
    def flash(session: ConsoleSession) -> tuple[str, str] | None:
        shown, session.flash = session.flash, None
        return shown

    async def overview(self, request: Request, session: ConsoleSession) -> Response:
        found = await self.call(self.plane.overview, 12)
        return html(pages.overview_page(found, session.csrf, self.flash(session), base_of(session)))

    async def datasets(self, request: Request, session: ConsoleSession) -> Response:
        return html(pages.datasets_page(await self.call(self.plane.datasets), session.csrf, base_of(session)))

    async def analysts(self, request: Request, session: ConsoleSession) -> Response:
        plane = self.plane
        found, names = await self.call(lambda: (plane.analysts(), [d["name"] for d in plane.datasets()]))
        return html(pages.analysts_page(found, names, session.csrf, self.flash(session), base_of(session)))

    async def history(self, request: Request, session: ConsoleSession) -> Response:
        query, plane = request.query_params, self.plane
        chosen = {k: query.get(k, "") for k in ("analyst", "dataset", "outcome")}
        text = query.get("offset", "0")
        if not text.isdigit() or len(text) > 12:
            raise UserError("offset must be a whole number ≥ 0", "follow the page links")

        def read() -> tuple[dict[str, Any], dict[str, list[str]]]:
            found = plane.history(**{k: v or None for k, v in chosen.items()}, limit=PAGE, offset=int(text))
            choices = {"analyst": [a["name"] for a in plane.analysts()],
                       "dataset": [d["name"] for d in plane.datasets()], "outcome": list(OUTCOMES)}
            return found, choices

        found, choices = await self.call(read)
        return html(pages.history_page(found, choices, chosen, session.csrf, base_of(session)))

    async def spending(self, request: Request, session: ConsoleSession) -> Response:
        plane = self.plane
        by_unit, by_analyst = await self.call(lambda: (plane.spending("unit"), plane.spending("analyst")))
        return html(pages.spending_page(by_unit, by_analyst, session.csrf, base_of(session)))

    async def audit(self, request: Request, session: ConsoleSession) -> Response:
        return html(pages.audit_page(await self.call(self.plane.audit.latest, 200), session.csrf, base_of(session)))

    # ---- forms: the session and its CSRF token, from this console's origin ---------------

    async def logout(self, request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        self.sessions.close(request.cookies.get(COOKIE))
        response = redirect(LOGIN)
        response.delete_cookie(COOKIE, path=base_of(session), httponly=True, samesite="strict")
        return response

    async def revoke(self, request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        await self.call(self.plane.revoke, name)
        session.flash = ("ok", f"Revoked {name}: their token is refused from now on.")
        return redirect(base_of(session) + "/analysts")

    async def rotate(self, request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        token = await self.call(self.plane.rotate, name)
        return html(pages.token_page(session.csrf, name, token, "A new token for", base_of(session)))

    async def add(self, request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        quota = _epsilon(fields.get("quota", ""))
        scope = [d.strip() for d in fields.get("datasets", "").split(",") if d.strip()] or None
        token = await self.call(self.plane.add_analyst, name, quota, fields.get("notion") or None, scope)
        return html(pages.token_page(session.csrf, name, token, "Added", base_of(session)))

    async def quota(self, request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name, epsilon = _name(fields), _epsilon(fields.get("epsilon", ""))
        notion, dataset = fields.get("notion") or None, fields.get("dataset") or None
        await self.call(self.plane.set_quota, name, epsilon, notion=notion, dataset=dataset)
        scope = f" under {notion or 'every notion'}" + (f" on {dataset}" if dataset else "")
        session.flash = ("ok", f"{name}'s quota{scope}: " + ("removed" if epsilon is None else f"{epsilon:g} ε"))
        return redirect(base_of(session) + "/analysts")

    # ---- what each access wraps around its handler ----------------------------------------

    def page(self, render: Callable[[Request, ConsoleSession], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            session = self.session_of(request)
            if session is None:
                return redirect(LOGIN)
            try:
                return await render(request, session)
            except UserError as exc:
                return html(pages.layout("Not done", "", session.csrf, "", ("error", said(exc)), base_of(session)), 400)
            except Exception as exc:  # a bug: logged for the owner, never a traceback on the page
                LOG.error("console error in %s: %s", request.url.path, type(exc).__name__, exc_info=True)
                return html(pages.message_page("Error", "internal error: the service log has the details"), 500)
        return handle

    def action(self, work: Callable[[Request, ConsoleSession, dict[str, str]], Awaitable[Response]]
               ) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            if not same_origin(request):
                return refused("a form posted from another site is refused")
            session = self.session_of(request)
            if session is None:
                return refused("log in first: this form has no valid session")
            try:
                fields = await form(request)
            except UserError as exc:
                return refused(said(exc))
            if not hmac.compare_digest(fields.get("csrf", "").encode(), session.csrf.encode()):
                return refused("the form's CSRF token is missing or wrong: reload the page and try again")
            try:
                return await work(request, session, fields)
            except UserError as exc:
                session.flash = ("error", said(exc))
                return redirect(base_of(session) + "/analysts")
        return handle


#: Every route of the console (DESIGN.md §9): the routes are made from these rows, and
#: `every_endpoint.every_endpoint` lists them beside the JSON API's.
CONSOLE_ENDPOINTS: tuple[ConsoleEndpoint, ...] = (
    ConsoleEndpoint("GET", LOGIN, Console.login_form, Access.OPEN, "The login form (the owner token)"),
    ConsoleEndpoint("POST", LOGIN, Console.login, Access.OPEN,
                    "Log in: opens a session and sends the browser to its own path"),
    ConsoleEndpoint("GET", "/console", Console.entry, Access.OPEN, "Sends the browser to the login form"),
    ConsoleEndpoint("GET", SESSION, Console.overview, Access.PAGE,
                    "Overview: ε spent against each limit, the analysts, the latest requests"),
    ConsoleEndpoint("GET", SESSION + "/datasets", Console.datasets, Access.PAGE,
                    "The registered datasets: releasable keys and limits"),
    ConsoleEndpoint("GET", SESSION + "/analysts", Console.analysts, Access.PAGE,
                    "The analysts: quotas, scopes, add, revoke, rotate"),
    ConsoleEndpoint("GET", SESSION + "/history", Console.history, Access.PAGE,
                    "The request history, filtered and paged"),
    ConsoleEndpoint("GET", SESSION + "/spending", Console.spending, Access.PAGE,
                    "ε spent over time, per unit and per analyst"),
    ConsoleEndpoint("GET", SESSION + "/audit", Console.audit, Access.PAGE, "The latest audit lines"),
    ConsoleEndpoint("POST", SESSION + "/logout", Console.logout, Access.FORM, "End the session"),
    ConsoleEndpoint("POST", SESSION + "/analysts/revoke", Console.revoke, Access.FORM, "Revoke an analyst's token"),
    ConsoleEndpoint("POST", SESSION + "/analysts/rotate", Console.rotate, Access.FORM,
                    "Give an analyst a new token (the old one is refused from now on)"),
    ConsoleEndpoint("POST", SESSION + "/analysts/add", Console.add, Access.FORM, "Add an analyst: their token, once"),
    ConsoleEndpoint("POST", SESSION + "/analysts/quota", Console.quota, Access.FORM, "Set or remove a quota"),
)


def console_routes(plane: OwnerPlane, check_token: Callable[[str], bool]) -> list[BaseRoute]:
    """The console's routes, every path under `/console`, to add to the owner listener's app:
    one per row of `CONSOLE_ENDPOINTS`, its handler bound to one `Console` and wrapped by what
    its access needs."""
    console = Console(plane, check_token)
    wrap = {Access.OPEN: lambda h: h, Access.PAGE: console.page, Access.FORM: console.action}
    return [Route(e.path, wrap[e.access](e.handler.__get__(console)), methods=[e.method]) for e in CONSOLE_ENDPOINTS]


def _name(fields: dict[str, str]) -> str:
    name = fields.get("name", "").strip()
    if not name:
        raise UserError("no analyst named", "fill in the analyst's name")
    return name


def _epsilon(text: str) -> float | None:
    """A quota from a form: empty is none; otherwise a finite number ≥ 0."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"ε must be a number, got {text[:40]!r}", "e.g. 1.5 (empty: no quota)") from None
    if not 0 <= value < float("inf"):
        raise UserError(f"ε must be a finite number ≥ 0, got {text[:40]!r}", "e.g. 1.5 (empty: no quota)")
    return value
