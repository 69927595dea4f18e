"""Who is asking: the bearer token of the `Authorization` header, checked against the ledger's
analysts (`pcor_sql.ledger.analysts`: tokens stored only as a hash, compared in constant time),
and the identities kept (what an analyst may read about themselves is `pcor_sql.analyst_account`).

A missing header, another scheme, a malformed, unknown or revoked token all come out as None:
the caller answers every one with the same 401 and the same body.
"""

from __future__ import annotations

import dataclasses

from pcor_sql.ledger.store import Ledger

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


def authenticate_header(ledger: Ledger, header: str | None) -> Identity | None:
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


class IdentityMemory:
    """The identities this service authenticated, by the hash of their token, kept while no
    analyst was added, revoked or given a new token in this process
    (`ledger.analysts.identity_changes`; every one of those goes through pcor-sql — CLI, Python,
    the owner's listener — while the service holds the database): a kept token is answered on
    the event loop, without a ledger read or a thread. Only found identities are kept (a wrong
    token never is, so guessing fills nothing); at most `size`, then it starts empty again."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._kept: dict[str, tuple[Identity, int]] = {}

    def get(self, header: str | None) -> Identity | None:
        """The kept identity of this header's token, or None (then authenticate with `read`)."""
        from pcor_sql.ledger.analysts import identity_changes, token_hash

        token = bearer_token(header)
        kept = self._kept.get(token_hash(token)) if token is not None else None
        if kept is None or kept[1] != identity_changes():
            return None
        return kept[0]

    def read(self, ledger: Ledger, header: str | None) -> Identity | None:
        """`authenticate_header`, keeping what it finds."""
        from pcor_sql.ledger.analysts import identity_changes, token_hash

        changes = identity_changes()  # before the read: a change committed meanwhile makes the answer stale at once
        found = authenticate_header(ledger, header)
        token = bearer_token(header)
        if found is not None and token is not None:
            if len(self._kept) >= self.size:
                self._kept.clear()
            self._kept[token_hash(token)] = (found, changes)
        return found

