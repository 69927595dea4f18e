"""What the remote client hands back: the service's JSON, with the in-process handle's names.

`RemoteExplanation`, `RemoteAnswer` and `RemoteCost` read like `pcor_sql.AnalystExplanation`,
`pcor_sql.AnalystAnswer` and `RequestCost` (the shapes `analyst_interface` declares) (`.context`, `.predicate`, `.anomaly`, `.epsilon`, `.summary`, ...)
but are built from the plain JSON the service sent — they hold nothing else, and importing
them loads neither DuckDB nor numpy. A field the service adds later is kept in `as_dict()`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Mapping

from pcor_sql_client.errors import UserError


# A field the service may leave out or null, and the empty value it then reads as.
_EMPTY_WHEN_MISSING = {"context": dict, "predicate": str, "summary": str, "privacy_summary": str}


class _FromJson:
    """Built from one JSON object of the service: each field read by its name (empty where
    `_EMPTY_WHEN_MISSING` says so), the whole object kept as `data`; any other key of it is
    read as an attribute."""

    _what: ClassVar[str]

    @classmethod
    def from_json(cls, item: Any) -> Any:
        item = _object(item, cls._what)
        values = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name == "data":
                continue
            value = item.get(f.name, item.get("value") if f.name == "key" else None)
            values[f.name] = (value or _EMPTY_WHEN_MISSING[f.name]()) if f.name in _EMPTY_WHEN_MISSING else value
        return cls(**values, data=item)

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("data") or {}
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class RemoteExplanation(_FromJson):
    """One released explanation: the key the analyst gave, the context (attribute → values),
    the predicate and SQL it compiles to, and the privacy parameters; also explanation_sql,
    verifier, search, samples, ... as the service sent them."""

    _what: ClassVar[str] = "an explanation"

    dataset: str
    key: Any
    context: dict[str, list[Any]]
    predicate: str
    epsilon: float
    summary: str
    privacy_summary: str
    data: Mapping[str, Any] = field(repr=False, compare=False)

    released = True


@dataclass(frozen=True)
class RemoteAnswer(_FromJson):
    """One anomaly answer: the key or the point asked about, the noisy bit and the privacy
    parameters; also value (for a point), beta, radius, k, norm, ... as the service sent them."""

    _what: ClassVar[str] = "an anomaly answer"

    dataset: str
    #: The key asked about, or the point (as the in-process `AnalystAnswer.key`).
    key: Any
    anomaly: bool
    epsilon: float
    privacy: str
    summary: str
    privacy_summary: str
    data: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class RemoteNotReleased(_FromJson):
    """A key of a batch that was charged but not released (as the in-process `NotReleased`): the
    key, `reason` (for an analyst always `not-answered`), the one generic message, ε and whether
    it stays charged (an analyst's always does). `released` is False; an explanation's is True."""

    _what: ClassVar[str] = "a key not released"

    key: Any
    reason: str
    epsilon: float
    charged: bool
    data: Mapping[str, Any] = field(repr=False, compare=False)

    released = False

    @property
    def message(self) -> str:
        return str(self.data.get("error") or "")

    @property
    def summary(self) -> str:
        cost = f"ε = {self.epsilon:g} " + ("stays charged" if self.charged else "given back (not charged)")
        return f"not released: {self.message} ({cost})"


def released_or_not(item: Any) -> "RemoteExplanation | RemoteNotReleased":
    """One item of an explain answer: an explanation, or a key the batch could not release."""
    if isinstance(item, dict) and item.get("released") is False:
        return RemoteNotReleased.from_json(item)
    return RemoteExplanation.from_json(item)


@dataclass(frozen=True)
class RemoteCost(_FromJson):
    """What a request would charge (`RemoteAnalyst.cost`), as the in-process `RequestCost`: ε
    per record or point under `notion`, k for (ε, k)-SP, how many charges and their sum; also the
    dataset. Reading it as a dict (`cost["total"]`, this method's old result) still works for one
    release, with a DeprecationWarning."""

    _what: ClassVar[str] = "a cost"

    notion: str
    epsilon: float
    k: int | None
    count: int
    total: float
    data: Mapping[str, Any] = field(repr=False, compare=False)

    def __getitem__(self, name: str) -> Any:
        warnings.warn("cost() returns a RemoteCost: read its attributes (cost.total), not cost['total']",
                      DeprecationWarning, stacklevel=2)
        return self.data[name]


def _object(item: Any, what: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise UserError(f"the service sent {what} that is not a JSON object",
                        "the client and the service may be different versions of pcor-sql")
    return item
