"""What the remote client hands back: the service's JSON, with the in-process handle's names.

`RemoteExplanation` and `RemoteAnswer` read like `pcor_sql.AnalystExplanation` and
`pcor_sql.AnalystAnswer` (`.context`, `.predicate`, `.anomaly`, `.epsilon`, `.summary`, ...)
but are built from the plain JSON the service sent — they hold nothing else, and importing
them loads neither DuckDB nor numpy. A field the service adds later is kept in `as_dict()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class RemoteExplanation:
    """One released explanation: the key the analyst gave, the context (attribute → values),
    the predicate and SQL it compiles to, and the privacy parameters."""

    dataset: str
    key: Any
    context: dict[str, list[Any]]
    predicate: str
    epsilon: float
    summary: str
    privacy_summary: str
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, item: Any) -> "RemoteExplanation":
        item = _object(item, "an explanation")
        return cls(
            dataset=item.get("dataset"), key=item.get("key"), context=item.get("context") or {},
            predicate=item.get("predicate") or "", epsilon=item.get("epsilon"),
            summary=item.get("summary") or "", privacy_summary=item.get("privacy_summary") or "", data=item,
        )

    def __getattr__(self, name: str) -> Any:  # explanation_sql, verifier, search, samples, ...
        data = self.__dict__.get("data") or {}
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class RemoteAnswer:
    """One anomaly answer: the point asked about, the noisy bit and the privacy parameters."""

    dataset: str
    anomaly: bool
    epsilon: float
    privacy: str
    summary: str
    privacy_summary: str
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, item: Any) -> "RemoteAnswer":
        item = _object(item, "an anomaly answer")
        return cls(
            dataset=item.get("dataset"), anomaly=item.get("anomaly"), epsilon=item.get("epsilon"),
            privacy=item.get("privacy"), summary=item.get("summary") or "",
            privacy_summary=item.get("privacy_summary") or "", data=item,
        )

    def __getattr__(self, name: str) -> Any:  # value, beta, radius, k, norm, ...
        data = self.__dict__.get("data") or {}
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)


def _object(item: Any, what: str) -> dict[str, Any]:
    from pcor_sql.errors import UserError

    if not isinstance(item, dict):
        raise UserError(f"the service sent {what} that is not a JSON object",
                        "the client and the service may be different versions of pcor-sql")
    return item
