"""Analysts, their tokens and quotas (DESIGN.md §6 "Analysts and their quotas").

The owner names analysts; each gets a bearer token of 256 bits from `secrets` (shown once,
stored only as its SHA-256), may be limited to some registered datasets, and may have an ε
quota per notion — over all datasets, and per dataset. A charge for an analyst fits both
their quota and every unit's limit, in one transaction (`quota_rules`, `Ledger.reserve`).
Revoking stops the token at once: `authenticate` no longer knows it, and a reservation in
flight conflicts with the revocation and is refused.

`authenticate` compares the token's hash with every analyst's in constant time
(`hmac.compare_digest`, no early exit), and answers None alike for an unknown, a revoked and a
malformed token. An analyst sees only their own data: `analyst_usage` (their quotas and spent)
and `analyst_history` (their requests: no unit names, no other analyst's spend, and no failure
reason — a reason class such as 'not-found' would tell them about the data).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import re
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from pcor_sql.errors import UserError
from pcor_sql.ledger.dataset_registry import find_dataset
from pcor_sql.ledger.input_checks import NOTIONS, check_notion, check_positive
from pcor_sql.ledger.quota_rules import ALL_DATASETS
from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.store_interface import LedgerOps
from pcor_sql.ledger.transactions import utc_now

TOKEN_PREFIX = "pcor_"

#: How many times this process changed who a token is (an analyst added, revoked or given a new
#: token): a service keeps the identities it authenticated only while this stands still
#: (`service.analyst_identity.IdentityMemory`). Bumped after the change commits.
_changes = [0]
_changes_lock = threading.Lock()


def identity_changes() -> int:
    """The count of `_changes` now (read it before authenticating, keep the answer with it)."""
    return _changes[0]


def _changed() -> None:
    with _changes_lock:
        _changes[0] += 1


def changed_elsewhere() -> None:
    """Another process sharing the ledger changed who a token is (DESIGN.md §11 "Revocation
    everywhere at once": `service.ledger_watch` saw the ledger's identity generation move, or
    could not read it): what this process kept about tokens is stale from now on."""
    _changed()


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}\Z")
_TOKEN = re.compile(r"pcor_[A-Za-z0-9_-]{43}\Z")


@dataclass(frozen=True)
class AnalystIdentity:
    """Who a token belongs to: the analyst's name and the registered datasets they may use
    (None: every one)."""

    name: str
    datasets: tuple[str, ...] | None


@dataclass(frozen=True)
class QuotaUsage:
    """An analyst's spent ε under one notion, over all datasets (`dataset` None) or on one;
    `limit` None: no quota."""

    notion: str
    dataset: str | None
    limit: float | None
    spent: float
    remaining: float | None
    releases: int

    def as_dict(self) -> dict[str, Any]:
        return {"notion": self.notion, "dataset": self.dataset, "limit": self.limit, "spent": self.spent,
                "remaining": self.remaining, "releases": self.releases}


@dataclass(frozen=True)
class AnalystInfo:
    name: str
    created_at: _dt.datetime
    revoked_at: _dt.datetime | None
    datasets: tuple[str, ...] | None
    usage: tuple[QuotaUsage, ...]

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "created_at": _iso(self.created_at), "revoked_at": _iso(self.revoked_at),
                "datasets": None if self.datasets is None else list(self.datasets),
                "usage": [u.as_dict() for u in self.usage]}


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_analyst_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"invalid analyst name {name!r}",
                        "use up to 64 letters, digits and . _ @ -, starting with a letter or digit")
    return name


def add_analyst(ledger: Ledger, name: str, quota: float | None = None, notion: str | None = None,
                datasets: Sequence[str] | None = None) -> str:
    """Name an analyst and return their bearer token (shown this once). `quota`: their ε quota
    under `notion`, or under every notion when `notion` is None; `datasets`: the registered
    datasets they may use (None: every one)."""
    ledger.ensure_writable()
    check_analyst_name(name)
    notions = _notions(notion, quota)
    limit = None if quota is None else check_positive(quota, "quota")
    allowed = None if datasets is None else _registered(ledger, datasets)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)

    def body(ops: LedgerOps) -> None:
        taken = ops.analyst_row(name)
        if taken:
            state = "revoked" if taken[1] is not None else "active"
            raise UserError(f"there is an analyst named {name!r} already ({state})", "choose another name")
        now = utc_now()
        ops.insert_analyst(name, token_hash(token), allowed, now)
        ops.bump_identity_generation()
        if limit is not None:
            ops.set_quota_limits(name, notions, ALL_DATASETS, limit, False, now)

    ledger.transaction(body)
    _changed()
    return token


def set_quota(ledger: Ledger, name: str, epsilon: float | None, *, notion: str | None = None,
              dataset: str | None = None) -> None:
    """Set (None: remove) `name`'s quota under `notion` (None: every notion), over all datasets
    or on the registered `dataset`."""
    ledger.ensure_writable()
    notions = _notions(notion, epsilon, clearing=True)
    limit = None if epsilon is None else check_positive(epsilon, "quota")
    key = ALL_DATASETS if dataset is None else _registered(ledger, [dataset])[0]

    def body(ops: LedgerOps) -> None:
        _require(ops, name)
        ops.set_quota_limits(name, notions, key, limit, False, utc_now())

    ledger.transaction(body)


def revoke_analyst(ledger: Ledger, name: str) -> AnalystInfo:
    """Stop `name`'s token at once. Their (analyst, notion) quota rows are written too, so a
    reservation in flight conflicts with this and is re-checked — and refused."""
    ledger.ensure_writable()

    def body(ops: LedgerOps) -> None:
        _require(ops, name)
        now = utc_now()
        ops.revoke_analyst(name, now)
        ops.set_quota_limits(name, NOTIONS, ALL_DATASETS, None, True, now)
        ops.bump_identity_generation()  # every service sharing the ledger drops the token's kept identity

    ledger.transaction(body)
    _changed()
    return _info(ledger, name)


def rotate_analyst(ledger: Ledger, name: str) -> str:
    """A new token for `name` (shown this once), the old one dead at once: quotas, spent and
    history stay, so replacing a leaked token needs no new analyst. A revoked analyst is
    reinstated with the new token (their old one stays dead). Their quota rows are written too,
    so a reservation in flight with the old token conflicts and is re-checked."""
    ledger.ensure_writable()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)

    def body(ops: LedgerOps) -> None:
        _require(ops, name)
        ops.set_token(name, token_hash(token))
        ops.set_quota_limits(name, NOTIONS, ALL_DATASETS, None, True, utc_now())
        ops.bump_identity_generation()

    ledger.transaction(body)
    _changed()
    return token


def list_analysts(ledger: Ledger) -> tuple[AnalystInfo, ...]:
    """Every analyst, by name, with their quota usage."""
    return tuple(_info(ledger, name) for name in ledger.read(lambda ops: ops.analyst_names(), []))


def authenticate(ledger: Ledger, token: object) -> AnalystIdentity | None:
    """The analyst whose token this is, or None — the same for an unknown, a revoked and a
    malformed token. Every stored hash is compared, in constant time."""
    well_formed = type(token) is str and _TOKEN.match(token) is not None
    candidate = token_hash(token if well_formed else "")  # type: ignore[arg-type]
    found = None
    for name, stored, revoked, datasets in ledger.read(lambda ops: ops.analyst_tokens(), []):
        if hmac.compare_digest(stored.encode("ascii"), candidate.encode("ascii")) and not revoked:
            found = AnalystIdentity(name, None if datasets is None else tuple(datasets))
    return found if well_formed else None


def analyst_usage(ledger: Ledger, name: str) -> tuple[QuotaUsage, ...]:
    """`name`'s quota and spent under every notion over all datasets, then per dataset."""
    rows = {(n, d): (limit, spent, releases) for n, d, limit, spent, releases in ledger.read(
        lambda ops: ops.quota_rows_of(name), [])}
    keys = [(n, ALL_DATASETS) for n in NOTIONS] + sorted(k for k in rows if k[1] != ALL_DATASETS)
    out = []
    for notion, dataset in keys:
        limit, spent, releases = rows.get((notion, dataset), (None, 0.0, 0))
        remaining = None if limit is None else max(0.0, limit - spent)
        out.append(QuotaUsage(notion, dataset or None, limit, spent, remaining, releases))
    return tuple(out)


def analyst_history(ledger: Ledger, name: str, limit: int | None = None,
                    before: str | None = None) -> tuple[dict[str, Any], ...]:
    """`name`'s own requests, oldest first (the most recent `limit`, asked before the request
    `before` — a release_id of theirs — when given: pages backwards), one per release, as plain
    data: release_id, requested_at (UTC, ISO), notion, epsilon, k, mechanism, dataset, key,
    outcome."""
    rows = ledger.read(lambda ops: ops.analyst_requests(name, limit, before), [])
    keys = ("release_id", "requested_at", "notion", "epsilon", "k", "mechanism", "dataset", "key", "outcome")
    return tuple({k: (_iso(v) if k == "requested_at" else v) for k, v in zip(keys, row)} for row in reversed(rows))


# ---- helpers ---------------------------------------------------------------------------------


def _notions(notion: str | None, quota: object, *, clearing: bool = False) -> tuple[str, ...]:
    if notion is not None and quota is None and not clearing:
        raise UserError("a notion was given without a quota", "give the quota too, e.g. --quota 1.0 --notion ocdp")
    return NOTIONS if notion is None else (check_notion(notion),)


def _registered(ledger: Ledger, datasets: Sequence[str]) -> list[str]:
    names = [datasets] if isinstance(datasets, str) else list(datasets)
    for name in names:
        if not isinstance(name, str) or find_dataset(ledger, name) is None:
            raise UserError(f"no registered dataset {name!r}", "register it first: pcor-sql dataset add")
    return sorted(set(names))


def _require(ops: LedgerOps, name: str) -> None:
    if ops.analyst_row(name) is None:
        raise UserError(f"there is no analyst named {name!r}", "see them with: pcor-sql analyst list")


def _info(ledger: Ledger, name: str) -> AnalystInfo:
    row = ledger.read(lambda ops: ops.analyst_row(name), None)
    if row is None:
        raise UserError(f"there is no analyst named {name!r}", "see them with: pcor-sql analyst list")
    created, revoked, datasets = row
    return AnalystInfo(name, created, revoked, None if datasets is None else tuple(datasets), analyst_usage(ledger, name))


def _iso(value: _dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(sep=" ", timespec="seconds")
