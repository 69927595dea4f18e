"""Who is asking: the bearer token of the `Authorization` header, checked against the ledger's
analysts (`pcor_sql.ledger.analysts`: tokens stored only as a hash, compared in constant time),
and what that analyst may see about themselves — quotas, spent ε, history — as plain JSON.

A missing header, another scheme, a malformed, unknown or revoked token all come out as None:
the caller answers every one with the same 401 and the same body.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pcor_sql.jsonable import jsonable

#: The longest Authorization header read (a token is ~43 characters; anything longer is refused unread).
MAX_HEADER = 512


def bearer_token(header: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>`, or None."""
    if header is None or len(header) > MAX_HEADER:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


@dataclasses.dataclass(frozen=True)
class Identity:
    """An authenticated analyst: their name and the registered datasets they may use (None: all)."""

    name: str
    datasets: tuple[str, ...] | None = None


def authenticate_header(ledger: Any, header: str | None) -> Identity | None:
    """The analyst the header's token belongs to, or None (missing, malformed, unknown, revoked)."""
    from pcor_sql.ledger.analysts import authenticate

    token = bearer_token(header)
    if token is None:
        return None
    found = authenticate(ledger, token)
    if found is None:
        return None
    if isinstance(found, str):
        return Identity(found)
    allowed = getattr(found, "datasets", None)
    return Identity(str(found.name), None if allowed is None else tuple(allowed))


def usage(ledger: Any, name: str) -> Any:
    """The analyst's quotas and spent ε per notion, as plain JSON."""
    from pcor_sql.ledger.analysts import analyst_usage

    return jsonable(analyst_usage(ledger, name))


def history(ledger: Any, name: str, limit: int | None = None, before: str | None = None) -> Any:
    """The analyst's own requests, oldest first, as plain JSON."""
    from pcor_sql.ledger.analysts import analyst_history

    return jsonable(analyst_history(ledger, name, limit, before))
