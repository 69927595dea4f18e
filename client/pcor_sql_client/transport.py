"""One HTTP exchange with the analyst service: JSON in, JSON out, errors as pcor-sql's own.

The service answers a refusal with a 4xx status and a body `{"error": ..., "fix": ...}`
(DESIGN.md §8); this module turns it back into the exception the in-process handle would have
raised (`Refused`, `BudgetExceeded`, `RequestFailed`, else `UserError`), with the server's
words. Anything that keeps the request from reaching the service or its answer from being read
(no server, a timeout, a body that is not JSON) is one `UserError` naming the URL — never an
httpx traceback. Nothing here imports DuckDB: an analyst holds no data.
"""

from __future__ import annotations

import json
import math
from typing import Any

try:
    import httpx
except ImportError:  # pcor-sql without its client extra: said once, when a connection is made
    httpx = None  # type: ignore[assignment]

from pcor_sql_client.errors import BudgetExceeded, Refused, RequestFailed, UserError

#: Seconds to wait for an answer: a release over a large table may take a while.
DEFAULT_TIMEOUT = 300.0

_SERVE_FIX = "check the URL and that the data owner's `pcor-sql serve` is running"

# The service's status codes (pcor_sql.service.http_app): 400 bad input, 413/415 a body too large or
# not JSON, 401 the token (missing, unknown, malformed, revoked — one answer for all), 403 the
# trust model's refusal, 429 a quota or limit reached — all before the reservation, nothing
# charged — and 422 the one generic failure after it (charged).
_STATUS: dict[int, type[UserError]] = {401: Refused, 403: Refused, 422: RequestFailed, 429: BudgetExceeded}


class Transport:
    """An httpx client bound to one service URL and one bearer token."""

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT, client: Any = None):
        if httpx is None and client is None:
            raise UserError("the pcor-sql client needs httpx", "pip install ./client (pcor-sql-client) or httpx")
        self.url = _base_url(url)
        if type(token) is not str or not token.strip():
            raise UserError("no analyst token given", "pass the token your data owner gave you (pcor-sql analyst add)")
        if any(c.isspace() for c in token.strip()) or not token.strip().isascii():
            raise UserError("the token is malformed (spaces or non-ASCII characters)",
                            "pass the token exactly as `pcor-sql analyst add` printed it")
        headers = {"Authorization": f"Bearer {token.strip()}", "Accept": "application/json"}
        # `client`: a prepared httpx.Client (a proxy, a custom CA bundle, a test's mock transport).
        self._http = client if client is not None else httpx.Client(timeout=timeout)
        self._headers = headers

    def close(self) -> None:
        self._http.close()

    def get(self, path: str) -> Any:
        return self._send("GET", path, None)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._send("POST", path, _plain(body, "request"))

    def _send(self, method: str, path: str, body: Any) -> Any:
        content = None if body is None else json.dumps(body, allow_nan=False).encode()
        headers = dict(self._headers)
        if content is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, self.url + path, content=content, headers=headers)
        except httpx.TimeoutException:
            raise UserError(f"the pcor-sql service at {self.url} did not answer in time",
                            "try again, or pass a larger timeout= to pcor_sql.connect") from None
        except (httpx.TransportError, httpx.InvalidURL, OSError) as exc:
            raise UserError(f"cannot reach the pcor-sql service at {self.url} ({_reason(exc)})", _SERVE_FIX) from None
        return _answer(response, self.url)


def _answer(response: httpx.Response, url: str) -> Any:
    """The JSON of a 2xx answer; else the exception the body describes."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    status = response.status_code
    if 200 <= status < 300:
        if payload is None:
            raise UserError(f"the service at {url} answered something that is not JSON", _SERVE_FIX)
        return payload
    error = payload.get("error") if isinstance(payload, dict) else None
    fix = payload.get("fix") if isinstance(payload, dict) else None
    if not isinstance(error, str) or not error:
        error = f"the service at {url} answered HTTP {status}"
        fix = _SERVE_FIX if status >= 500 or status == 404 else "check the request"
    exc_class = _STATUS.get(status, UserError)
    exc = exc_class(error, fix if isinstance(fix, str) and fix else None)
    exc.status_code = status  # type: ignore[attr-defined]  # for callers that branch on it
    raise exc


def _plain(value: Any, where: str) -> Any:
    """`value` as JSON data: exact str, int, float, bool, None, lists and string-keyed dicts.
    Tuples become lists. Anything else (a numpy scalar, a date, a custom object) is refused
    here with the path to it, rather than as a serialisation traceback."""
    kind = type(value)
    if value is None or kind in (str, int, bool):
        return value
    if kind is float:
        if not math.isfinite(value):
            raise UserError(f"{where} is {value!r}, not a finite number", "pass a finite number")
        return value
    if kind in (list, tuple):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise UserError(f"{where} has a key {k!r} that is not a string", "use text keys")
            out[k] = _plain(v, f"{where}.{k}")
        return out
    raise UserError(f"{where} is a {kind.__name__}, which cannot be sent",
                    "pass plain numbers, strings, booleans, lists or dicts (e.g. int(x), not numpy.int64(x))")


def _base_url(url: Any) -> str:
    if type(url) is not str or not url.strip():
        raise UserError("no service URL given", "pass the URL of the data owner's service, e.g. http://127.0.0.1:8000")
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"the service URL {url!r} is not an http(s) URL", "e.g. http://127.0.0.1:8000")
    return url


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
