"""What a session returns: released explanations, anomaly answers, and the owner's COE.

Only the released context and the privacy parameters are in an `Explanation`; population
sizes, utilities and search diagnostics are in `.owner`, filled only with `owner_view=True`.
`CoeResult` is the owner's exact enumeration and is never a private release.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterator

import numpy as np

from pcor_sql.engine.release import OwnerView

@dataclass(frozen=True)
class Explanation:
    """One released explanation: the context in which the record is an outlier."""

    record: dict[str, Any]
    context: dict[str, list[Any]]
    predicate: str
    explanation_sql: str
    epsilon: float
    epsilon1: float
    accounting: str
    search: str
    samples: int
    descents: int
    em_calls: int
    verifier: str
    utility: str
    start_source: str
    seeded: bool
    dataset: str | None
    units: tuple[str, ...] = ()
    budget_spent: float | None = None
    budget_limit: float | None = None
    owner: OwnerView | None = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The stable JSON shape (documented in the README)."""
        out = _released(self, exclude=("budget_spent", "budget_limit"))
        if self.budget_limit is not None:
            out["budget"] = {"spent": self.budget_spent, "limit": self.budget_limit}
        if self.owner is not None:
            out["owner"] = self.owner.as_dict()
        return out


def _released(result: Any, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A result's public fields in declaration order (the JSON keys), the seeded-run label."""
    out = {f.name: getattr(result, f.name) for f in fields(result) if f.name != "owner" and f.name not in exclude}
    if "units" in out:
        out["units"] = list(out["units"])
    if getattr(result, "seeded", False):
        out["warning"] = "seeded run: reproducible, not for real releases"
    return out


@dataclass(frozen=True)
class ValidContext:
    """One member of COE(D, V) (owner's view: utilities are private)."""

    context: dict[str, list[Any]]
    predicate: str
    utility: float


@dataclass(frozen=True)
class CoeResult:
    """The owner's exact enumeration of one record's valid contexts. NOT a private release."""

    record: dict[str, Any]
    verifier: str
    utility: str
    admissible: int
    size: int
    max_utility: float | None
    _space: Any = field(repr=False)
    _masks: Any = field(repr=False)
    _utilities: Any = field(repr=False)
    _predicate: Callable[[int], str] = field(repr=False)

    def __iter__(self) -> Iterator[ValidContext]:
        for mask, u in zip(self._masks, self._utilities):
            yield self._context(int(mask), float(u))

    def __len__(self) -> int:
        return self.size

    def best(self) -> ValidContext | None:
        """The valid context of largest utility (first in enumeration order among ties)."""
        if self.size == 0:
            return None
        i = int(np.argmax(self._utilities))
        return self._context(int(self._masks[i]), float(self._utilities[i]))

    def ranked(self, limit: int | None = None) -> list[ValidContext]:
        """The `limit` valid contexts of largest utility (all without a limit), largest first;
        ties keep enumeration order. Only the shown ones are rendered as SQL."""
        order = np.argsort(-np.asarray(self._utilities, dtype=np.float64), kind="stable")
        if limit is not None:
            order = order[:limit]
        return [self._context(int(self._masks[i]), float(self._utilities[i])) for i in order]

    def _context(self, mask: int, utility: float) -> ValidContext:
        return ValidContext(self._space.values(mask), self._predicate(mask), utility)


@dataclass(frozen=True)
class AnomalyResult:
    """One private answer to "is this record a (β, r)-anomaly?" (DESIGN.md §3)."""

    record: dict[str, Any]
    anomaly: bool
    epsilon: float
    privacy: str
    k: int | None
    beta: float
    radius: float
    norm: str
    seeded: bool
    dataset: str | None
    units: tuple[str, ...] = ()
    owner: dict[str, Any] | None = field(default=None, repr=False)

    def as_dict(self, owner_view: bool | None = None) -> dict[str, Any]:
        """The stable JSON shape; owner fields only when the result carries them (owner_view)."""
        out = _released(self)
        if self.owner is not None and owner_view is not False:
            out["owner"] = self.owner
        return out


@dataclass(frozen=True)
class AnalystExplanation:
    """What an analyst receives for one released explanation (DESIGN.md §6 "Released"): the key
    they gave, the context, the predicate and SQL it compiles to, and the privacy parameters —
    no other column of the record, no counts, no utilities, no search diagnostics."""

    dataset: str
    key: Any
    metric: str
    context: dict[str, list[Any]]
    predicate: str
    explanation_sql: str
    epsilon: float
    epsilon1: float
    accounting: str
    search: str
    samples: int
    verifier: str
    utility: str

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class AnalystAnswer:
    """What an analyst receives for one anomaly question: the key they gave, the noisy bit and
    the privacy parameters — nothing else."""

    dataset: str
    key: Any
    columns: tuple[str, ...]
    anomaly: bool
    epsilon: float
    privacy: str
    k: int | None
    beta: float
    radius: float
    norm: str

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["columns"] = list(self.columns)
        return out
