"""The owner console's sessions and plumbing (DESIGN.md §9 "Secrets on disk and in the browser"):
a session is a random id (the cookie) and a random path key (its pages' URL) with a CSRF token;
the responses every page shares (no-store, no framing, a CSP without scripts); the origin check
and the form reader. The pages themselves and their table are `console_app`.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pcor_sql.errors import UserError
from pcor_sql.service import console_pages as pages
from pcor_sql.service.loopback import loopback_origin

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


def base_of(session: ConsoleSession) -> str:
    """Where a session's pages are: `/console/<key>` (its cookie is scoped to that path)."""
    return f"/console/{session.key}"


def said(exc: UserError) -> str:
    """A refusal as one line: the problem, then its fix."""
    return exc.problem + (f" — {exc.fix}" if exc.fix else "")
