"""What the owner's listener takes for itself (DESIGN.md §9): a loopback `Host` only, and, for
the console's forms, an `Origin` on that allow-list — never "whatever Host the request names".

DNS rebinding: a page of `evil.example` whose name the attacker then points at 127.0.0.1 makes
the owner's browser send `Host: evil.example:PORT` to the owner's port, with `Origin:
http://evil.example:PORT` — an Origin that equals scheme + Host. So the listener answers only the
names it is reached by on this machine (127.0.0.1, localhost, [::1]) with the port of the socket
the request arrived on (from the socket itself, never from a header); on the scheme's default
port the bare name too, as browsers send it.
"""

from __future__ import annotations

from typing import Any

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MISDIRECTED = ("this listener answers loopback names only (127.0.0.1, localhost, [::1] with its port)",
               "connect to http://127.0.0.1:PORT (the runtime file beside the database names it)")


def authorities(scope: dict[str, Any]) -> frozenset[str]:
    """The `Host` values this listener answers: each loopback name with the socket's port."""
    port = (scope.get("server") or (None, None))[1]
    names = set(LOOPBACK_NAMES)
    out = {f"{name}:{port}" for name in names} if port is not None else set()
    if (scope.get("scheme"), port) in (("http", 80), ("https", 443), ("http", None), ("https", None)):
        out |= names
    return frozenset(out)


def host_header(scope: dict[str, Any]) -> str | None:
    """The request's Host header, lower case (None if absent or given twice)."""
    found = [v for k, v in scope.get("headers") or () if k.lower() == b"host"]
    if len(found) != 1:
        return None
    return found[0].decode("latin-1").strip().lower()


def loopback_host(scope: dict[str, Any]) -> bool:
    return host_header(scope) in authorities(scope)


def loopback_origin(scope: dict[str, Any], origin: str) -> bool:
    """Whether `origin` (an Origin header) is this listener's own: scheme and Host, where the
    Host is a loopback name with this socket's port (an Origin equal to a rebound Host is not)."""
    host = host_header(scope)
    if host is None or host not in authorities(scope):
        return False
    return origin.strip().lower() == f"{scope.get('scheme', 'http')}://{host}"
