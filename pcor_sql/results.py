"""What a session returns: released explanations, anomaly answers, and the owner's COE.

Only the released context and the privacy parameters are in an `Explanation`; population
sizes, utilities and search diagnostics are in `.owner`, filled only with `owner_view=True`.
`CoeResult` is the owner's exact enumeration and is never a private release.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterator

import numpy as np

from pcor_sql import notebook
from pcor_sql.anomaly_words import AnomalyWords
from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.record_search import OwnerView
from pcor_sql.plots import Picture, SavePath
from pcor_sql.request_values import OutlierRequest
from pcor_sql.readable import (
    outlier_privacy_sentence,
    key_words,
    outlier_sentence,
    record_words,
    round_epsilon,
)

class _Shown:
    """Jupyter's display of a result: each kind names its `notebook` functions (HTML and
    Markdown) directly, so a reader and a type checker follow the call."""

    _html: ClassVar[Callable[[Any], str]]
    _markdown: ClassVar[Callable[[Any], str]]

    def _repr_html_(self) -> str:
        return type(self)._html(self)

    def _repr_markdown_(self) -> str:
        return type(self)._markdown(self)


class Results(list):
    """The results of one call (`explain_outliers`, `identify_anomalies`, a statement): a list,
    which a notebook shows as one table, a row per result (`notebook.results_html`)."""

    def _repr_html_(self) -> str:
        return notebook.results_html(self)

    def _repr_markdown_(self) -> str:
        return notebook.results_markdown(self)


@dataclass(frozen=True)
class Charge:
    """What the ledger charged for one result: the units, the registered dataset it went
    through, and (when a unit has a limit) the binding unit's spent total and limit."""

    units: tuple[str, ...] = ()
    dataset: str | None = None
    spent: float | None = None
    limit: float | None = None


@dataclass(frozen=True)
class Explanation(_Shown):
    """One released explanation: the context in which the record is an outlier. It holds the
    request it answers and the charge it cost; the privacy parameters are the request's."""

    request: OutlierRequest = field(repr=False)
    record: dict[str, Any]
    context: dict[str, list[Any]]
    predicate: str
    explanation_sql: str
    em_calls: int
    verifier: str
    start_source: str
    seeded: bool
    charge: Charge = field(default=Charge(), repr=False)
    #: Attributes the context keeps whole (every declared value): they restrict nothing.
    full_attributes: tuple[str, ...] = field(default=(), repr=False)
    #: Ordinal attributes' runs of bins, one interval each (`{"age": "[18, 35)"}`): for people.
    ranges: dict[str, str] = field(default_factory=dict, repr=False)
    owner: OwnerView | None = field(default=None, repr=False)
    #: The owner's reader of the data behind `plot()`: () → (context's values, all values).
    values: Callable[[], tuple[list[Any], list[Any]]] | None = field(default=None, repr=False, compare=False)

    #: A batch's records not released are `NotReleased`, beside these.
    released = True

    # ---- the request's parameters, as the result reports them ------------------------------
    epsilon = property(lambda self: self.request.budget.epsilon)
    epsilon1 = property(lambda self: self.request.budget.epsilon1)
    accounting = property(lambda self: self.request.budget.accounting)
    search = property(lambda self: str(self.request.search))
    samples = property(lambda self: self.request.samples)
    utility = property(lambda self: str(self.request.utility))
    metric = property(lambda self: self.request.metric)
    selector = property(lambda self: self.request.selector)
    dataset = property(lambda self: self.charge.dataset)
    units = property(lambda self: self.charge.units)
    budget_spent = property(lambda self: self.charge.spent if self.charge.limit is not None else None)
    budget_limit = property(lambda self: self.charge.limit)

    def __getattr__(self, name: str) -> Any:
        # A search option the result shows (`descents`): the request's value.
        if name != "request" and name in _search_options_shown():
            return getattr(self.request, name)
        raise AttributeError(name)

    @property
    def summary(self) -> str:
        """What was concluded, in plain words, from released values only: `salary of the record
        where id = 42 is an outlier (LOF, k = 20, threshold = 1.5) among the rows where ...`."""
        return outlier_sentence(self.metric, record_words(self.selector, self.record), self.verifier, self.context,
                                self.full_attributes, self.ranges)

    @property
    def privacy_summary(self) -> str:
        """The privacy cost in words: `privacy cost ε = 0.2 (output-constrained DP) over 51
        randomized choices of ε1 = 0.00392 each`."""
        return outlier_privacy_sentence(self.epsilon, self.epsilon1, self.accounting, self.em_calls)

    def as_dict(self) -> dict[str, Any]:
        """The stable JSON shape (documented in docs/cli.md, "JSON output")."""
        out: dict[str, Any] = {"summary": self.summary, "privacy_summary": self.privacy_summary}
        out.update({name: getattr(self, name) for name in EXPLANATION_KEYS})
        out["units"] = list(self.units)
        if self.seeded:
            out["warning"] = SEEDED_WARNING
        if self.budget_limit is not None:
            out["budget"] = {"spent": round_epsilon(self.budget_spent), "limit": self.budget_limit}
        if self.owner is not None:
            out["owner"] = self.owner.as_dict()
        return out

    def plot(self, path: SavePath | None = None) -> Picture:
        """The record's value against the distribution of its released context and of the whole
        table (matplotlib: the `plot` extra). Owner only: it reads and shows the data, and the
        picture says "NOT FOR RELEASE". Saved to `path` (PNG, ...) when given; returns a
        `plots.Picture`: the Figure, which a notebook shows inline in any kernel."""
        from pcor_sql.errors import UserError
        from pcor_sql.plots import explanation_figure

        if self.values is None:
            raise UserError("this explanation has no data to draw", "plot it from the session that released it")
        context_values, all_values = self.values()
        value = self.record.get(self.metric, None)
        if value is None:  # the metric is an expression: its value is the record's in the context
            value = next((v for k, v in self.record.items() if k.lower() == self.metric.lower()), None)
        if value is None:
            raise UserError(f"the record has no column {self.metric}", "plot a release over a column metric")
        return explanation_figure(self.metric, float(value), context_values, all_values, self.summary, path)

    _html = staticmethod(notebook.explanation_html)
    _markdown = staticmethod(notebook.explanation_markdown)


SEEDED_WARNING = "seeded run: reproducible, not for real releases"


@dataclass(frozen=True)
class NotReleased:
    """A record of a batch whose release failed after the batch was charged: its key, the
    class of the failure (`no-valid-context`, `missing`, `data`, `internal`, or `not-answered`
    for an analyst, who is told nothing more) and the message. `charged`: its ε stays spent (an
    analyst's); False when it was given back (an owner's failure is not charged). The records
    of the batch that were released are `Explanation`s beside it; `released` tells them apart."""

    key: Any
    reason: str
    message: str
    epsilon: float
    charged: bool
    record: dict[str, Any] | None = field(default=None, repr=False)
    dataset: str | None = None

    released = False

    @staticmethod
    def key_of(selector: str, record: dict[str, Any]) -> str:
        """The owner's record as the selector picks it: `id = 1`."""
        return record_words(selector, record).removeprefix("the record where ")

    @property
    def summary(self) -> str:
        cost = f"ε = {self.epsilon:g} " + ("stays charged" if self.charged else "given back (not charged)")
        return f"not released: {self.message} ({cost})"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"released": False, "key": self.key, "reason": self.reason, "error": self.message,
                               "epsilon": self.epsilon, "charged": self.charged}
        if self.record is not None:
            out["record"] = self.record
        if self.dataset is not None:
            out["dataset"] = self.dataset
        return out


def _search_options_shown() -> tuple[str, ...]:
    from pcor_sql.core.search_specs import search_option_specs

    return tuple(name for name, spec in search_option_specs().items() if spec.in_result)


#: The JSON keys of a release, in order (stable, documented in docs/cli.md).
EXPLANATION_KEYS = (
    "record", "context", "predicate", "explanation_sql", "epsilon", "epsilon1", "accounting", "search",
    *_search_options_shown(), "em_calls", "verifier", "utility", "start_source", "seeded", "dataset", "units",
    "metric", "selector",
)


def _released(result: AnomalyResult, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A result's public fields in declaration order (the JSON keys), the seeded-run label."""
    out = {f.name: getattr(result, f.name) for f in fields(result) if f.name != "owner" and f.name not in exclude}
    if "units" in out:
        out["units"] = list(out["units"])
    if getattr(result, "seeded", False):
        out["warning"] = SEEDED_WARNING
    return out


@dataclass(frozen=True)
class ValidContext:
    """One member of COE(D, V) (owner's view: utilities are private)."""

    context: dict[str, list[Any]]
    predicate: str
    utility: float
    #: Ordinal attributes' runs of bins, one interval each (`{"age": "[18, 35)"}`): for people.
    ranges: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CoeResult(_Shown):
    """The owner's exact enumeration of one record's valid contexts. NOT a private release."""

    record: dict[str, Any]
    verifier: str
    utility: str
    admissible: int
    size: int
    max_utility: float | None
    _space: ContextSpace = field(repr=False)
    #: The valid contexts' masks and their utilities, in enumeration order (`Evaluator.coe`).
    _masks: np.ndarray = field(repr=False)
    _utilities: np.ndarray = field(repr=False)
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
        return list(self.iter_ranked(limit))

    def iter_ranked(self, limit: int | None = None) -> Iterator[ValidContext]:
        """As `ranked`, one context at a time: each is rendered when it is asked for, so a
        caller can write the first before the last is made (the CLI's JSON streams this way)."""
        order = np.argsort(-np.asarray(self._utilities, dtype=np.float64), kind="stable")
        if limit is not None:
            order = order[:limit]
        for i in order.tolist():
            yield self._context(int(self._masks[i]), float(self._utilities[i]))

    _html = staticmethod(notebook.coe_html)
    _markdown = staticmethod(notebook.coe_markdown)

    def _context(self, mask: int, utility: float) -> ValidContext:
        return ValidContext(self._space.values(mask), self._predicate(mask), utility, self._space.ranges(mask))


@dataclass(frozen=True)
class AnomalyResult(AnomalyWords, _Shown):
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
        out = {"summary": self.summary, "privacy_summary": self.privacy_summary, **_released(self)}
        if self.owner is not None and owner_view is not False:
            out["owner"] = self.owner
        return out

    _html = staticmethod(notebook.answer_html)
    _markdown = staticmethod(notebook.answer_markdown)

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
    #: None for a search that draws no samples (direct).
    samples: int | None
    verifier: str
    utility: str
    #: Attributes the context keeps whole (the predicate leaves them out): for the summary.
    full_attributes: tuple[str, ...] = field(default=(), repr=False)
    #: Ordinal attributes' runs of bins, one interval each: for the summary.
    ranges: dict[str, str] = field(default_factory=dict, repr=False)

    released = True

    @property
    def summary(self) -> str:
        """The conclusion in plain words, from what the analyst is given: `pay of record 42 of
        people is an outlier (Grubbs' test, alpha = 0.05) among the rows where dept is ...`."""
        return outlier_sentence(self.metric, key_words(self.dataset, self.key), self.verifier, self.context,
                                self.full_attributes, self.ranges)

    @property
    def privacy_summary(self) -> str:
        return outlier_privacy_sentence(self.epsilon, self.epsilon1, self.accounting)

    def as_dict(self) -> dict[str, Any]:
        out = {"summary": self.summary, "privacy_summary": self.privacy_summary}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("full_attributes", "ranges")})
        return out


@dataclass(frozen=True)
class AnalystAnswer(AnomalyWords):
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

    @classmethod
    def of(cls, answer: AnomalyResult, dataset: str, key: Any, columns: tuple[str, ...]) -> AnalystAnswer:
        """The analyst's part of the owner's `answer`: the bit and its parameters, never the record."""
        return cls(dataset, key, columns, answer.anomaly, answer.epsilon, answer.privacy, answer.k, answer.beta,
                   answer.radius, answer.norm)

    def as_dict(self) -> dict[str, Any]:
        out = {"summary": self.summary, "privacy_summary": self.privacy_summary}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        out["columns"] = list(self.columns)
        return out
