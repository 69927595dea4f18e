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
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from pcor_sql.errors import UserError
from pcor_sql.service import console_pages as pages
from pcor_sql.service.loopback import loopback_origin
from pcor_sql.service.owner_plane import OUTCOMES, OwnerPlane

LOG = logging.getLogger("pcor_sql.service.console")
COOKIE = "pcor_console"
LOGIN = "/console/login"
#: The session's pages: `/console/<its key>/...` (the key is url-safe base64, never "login").
SESSION = "/console/{key}"
#: A session ends after this long without a request, and after `LIFETIME` in any case.
IDLE = 8 * 3600.0
LIFETIME = 24 * 3600.0
#: The most sessions kept (the oldest goes first): logging in again and again cannot fill memory.
MAX_SESSIONS = 64
MAX_FORM = 16 * 1024
PAGE = 50
CSP = ("default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
       " connect-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Cache-Control": "no-store", "Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}


@dataclass
class ConsoleSession:
    csrf: str
    created: float
    seen: float
    #: The session's path key: its pages are `/console/<key>/...`, its cookie scoped there.
    key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    #: One message shown on the next page (after a redirect), then dropped.
    flash: tuple[str, str] | None = field(default=None)


class ConsoleSessions:
    """The console's sessions, in memory (a restart logs everyone out)."""

    def __init__(self) -> None:
        self._by_id: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def open(self) -> tuple[str, ConsoleSession]:
        now = time.monotonic()
        sid, session = secrets.token_urlsafe(32), ConsoleSession(secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._expire(now)
            while len(self._by_id) >= MAX_SESSIONS:
                del self._by_id[min(self._by_id, key=lambda k: self._by_id[k].seen)]
            self._by_id[sid] = session
        return sid, session

    def get(self, sid: str | None, key: str | None) -> ConsoleSession | None:
        """The session of cookie `sid`, if `key` is its path key (both are needed)."""
        if not sid or not key:
            return None
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            session = self._by_id.get(sid)
            if session is None or not hmac.compare_digest(session.key.encode(), key.encode("utf-8", "replace")):
                return None
            session.seen = now
            return session

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def _expire(self, now: float) -> None:
        for sid in [k for k, s in self._by_id.items() if now - s.seen > IDLE or now - s.created > LIFETIME]:
            del self._by_id[sid]


def html(text: str, status: int = 200) -> Response:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def redirect(to: str) -> Response:
    return RedirectResponse(to, status_code=303, headers=HEADERS)


def refused(text: str) -> Response:
    return html(pages.message_page("Refused", text), 403)


def same_origin(request: Request) -> bool:
    """False for a request a browser says came from another site: an Origin that is not this
    console on a loopback name and this socket's port (`loopback.loopback_origin`: never compared
    with the Host header, which DNS rebinding sets), or Sec-Fetch-Site cross-site / same-site. A
    client that sends neither (curl, a test client) is judged by its session and CSRF token alone."""
    origin = request.headers.get("origin")
    if origin is not None and not loopback_origin(request.scope, origin):
        return False
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


async def form(request: Request) -> dict[str, str]:
    """A urlencoded form body (at most `MAX_FORM` bytes; the first value of each field)."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM:
            raise UserError("the form is too large", "send a shorter form")
    out: dict[str, str] = {}
    for key, value in parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True):
        out.setdefault(key, value)
    return out


def console_routes(plane: OwnerPlane, check_token: Callable[[str], bool]) -> list[BaseRoute]:
    """The console's routes, every path under `/console`, to add to the owner listener's app.
    `check_token(text)` says whether `text` is the owner token (an analyst's is not)."""
    sessions = ConsoleSessions()

    async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def session_of(request: Request) -> ConsoleSession | None:
        return sessions.get(request.cookies.get(COOKIE), request.path_params.get("key"))

    def page(render: Callable[[Request, ConsoleSession], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            session = session_of(request)
            if session is None:
                return redirect(LOGIN)
            try:
                return await render(request, session)
            except UserError as exc:
                return html(pages.layout("Not done", "", session.csrf, "", ("error", _said(exc)), base_of(session)), 400)
            except Exception as exc:  # a bug: logged for the owner, never a traceback on the page
                LOG.error("console error in %s: %s", request.url.path, type(exc).__name__, exc_info=True)
                return html(pages.message_page("Error", "internal error: the service log has the details"), 500)
        return handle

    def action(work: Callable[[Request, ConsoleSession, dict[str, str]], Awaitable[Response]]) -> Callable[..., Any]:
        async def handle(request: Request) -> Response:
            if not same_origin(request):
                return refused("a form posted from another site is refused")
            session = session_of(request)
            if session is None:
                return refused("log in first: this form has no valid session")
            try:
                fields = await form(request)
            except UserError as exc:
                return refused(_said(exc))
            if not hmac.compare_digest(fields.get("csrf", "").encode(), session.csrf.encode()):
                return refused("the form's CSRF token is missing or wrong: reload the page and try again")
            try:
                return await work(request, session, fields)
            except UserError as exc:
                session.flash = ("error", _said(exc))
                return redirect(base_of(session) + "/analysts")
        return handle

    async def login_form(request: Request) -> Response:
        return html(pages.login_page())  # no session cookie is ever sent here (it is scoped to its path)

    async def login(request: Request) -> Response:
        if not same_origin(request):
            return refused("a form posted from another site is refused")
        try:
            token = (await form(request)).get("token", "").strip()
        except UserError as exc:
            return refused(_said(exc))
        if not token or not check_token(token):
            return html(pages.login_page("That is not the owner token (an analyst's token does not open the"
                                         " console)."), 401)
        sid, session = sessions.open()  # a fresh id and key at every login: a planted id is never promoted
        response = redirect(base_of(session))
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path=base_of(session),
                            max_age=int(LIFETIME), secure=request.url.scheme == "https")
        return response

    async def logout(request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        sessions.close(request.cookies.get(COOKIE))
        response = redirect(LOGIN)
        response.delete_cookie(COOKIE, path=base_of(session), httponly=True, samesite="strict")
        return response

    def flash(session: ConsoleSession) -> tuple[str, str] | None:
        shown, session.flash = session.flash, None
        return shown

    async def overview(request: Request, session: ConsoleSession) -> Response:
        return html(pages.overview_page(await call(plane.overview, 12), session.csrf, flash(session), base_of(session)))

    async def datasets(request: Request, session: ConsoleSession) -> Response:
        return html(pages.datasets_page(await call(plane.datasets), session.csrf, base_of(session)))

    async def analysts(request: Request, session: ConsoleSession) -> Response:
        found, names = await call(lambda: (plane.analysts(), [d["name"] for d in plane.datasets()]))
        return html(pages.analysts_page(found, names, session.csrf, flash(session), base_of(session)))

    async def history(request: Request, session: ConsoleSession) -> Response:
        query = request.query_params
        chosen = {k: query.get(k, "") for k in ("analyst", "dataset", "outcome")}
        text = query.get("offset", "0")
        if not text.isdigit() or len(text) > 12:
            raise UserError("offset must be a whole number ≥ 0", "follow the page links")

        def read() -> tuple[dict[str, Any], dict[str, list[str]]]:
            found = plane.history(**{k: v or None for k, v in chosen.items()}, limit=PAGE, offset=int(text))
            choices = {"analyst": [a["name"] for a in plane.analysts()],
                       "dataset": [d["name"] for d in plane.datasets()], "outcome": list(OUTCOMES)}
            return found, choices

        found, choices = await call(read)
        return html(pages.history_page(found, choices, chosen, session.csrf, base_of(session)))

    async def spending(request: Request, session: ConsoleSession) -> Response:
        by_unit, by_analyst = await call(lambda: (plane.spending("unit"), plane.spending("analyst")))
        return html(pages.spending_page(by_unit, by_analyst, session.csrf, base_of(session)))

    async def audit(request: Request, session: ConsoleSession) -> Response:
        return html(pages.audit_page(await call(plane.audit.latest, 200), session.csrf, base_of(session)))

    async def revoke(request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        await call(plane.revoke, name)
        session.flash = ("ok", f"Revoked {name}: their token is refused from now on.")
        return redirect(base_of(session) + "/analysts")

    async def rotate(request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        token = await call(plane.rotate, name)
        return html(pages.token_page(session.csrf, name, token, "A new token for", base_of(session)))

    async def add(request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name = _name(fields)
        quota = _epsilon(fields.get("quota", ""))
        scope = [d.strip() for d in fields.get("datasets", "").split(",") if d.strip()] or None
        token = await call(plane.add_analyst, name, quota, fields.get("notion") or None, scope)
        return html(pages.token_page(session.csrf, name, token, "Added", base_of(session)))

    async def quota(request: Request, session: ConsoleSession, fields: dict[str, str]) -> Response:
        name, epsilon = _name(fields), _epsilon(fields.get("epsilon", ""))
        notion, dataset = fields.get("notion") or None, fields.get("dataset") or None
        await call(plane.set_quota, name, epsilon, notion=notion, dataset=dataset)
        scope = f" under {notion or 'every notion'}" + (f" on {dataset}" if dataset else "")
        session.flash = ("ok", f"{name}'s quota{scope}: " + ("removed" if epsilon is None else f"{epsilon:g} ε"))
        return redirect(base_of(session) + "/analysts")

    async def entry(request: Request) -> Response:
        return redirect(LOGIN)  # the session's pages are under its own key, which only its browser knows

    get = {"": overview, "/datasets": datasets, "/analysts": analysts, "/history": history, "/spending": spending,
           "/audit": audit}
    post = {"/logout": logout, "/analysts/revoke": revoke, "/analysts/rotate": rotate, "/analysts/add": add,
            "/analysts/quota": quota}
    return [Route(LOGIN, login_form, methods=["GET"]), Route(LOGIN, login, methods=["POST"]),
            Route("/console", entry, methods=["GET"]),
            *(Route(SESSION + path, page(render), methods=["GET"]) for path, render in get.items()),
            *(Route(SESSION + path, action(work), methods=["POST"]) for path, work in post.items())]


def base_of(session: ConsoleSession) -> str:
    """Where a session's pages are: `/console/<key>` (its cookie is scoped to that path)."""
    return f"/console/{session.key}"


def _said(exc: UserError) -> str:
    return exc.problem + (f" — {exc.fix}" if exc.fix else "")


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
