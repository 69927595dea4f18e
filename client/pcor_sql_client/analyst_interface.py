"""The analyst interface, declared once (DESIGN.md §8 "The analyst's client"): what an analyst
may call and what each call means, whether the handle is in-process (`pcor_sql.analyst.Analyst`,
made by `Owner.analyst()`) or remote (`RemoteAnalyst`, made by `pcor_sql.connect`). Both satisfy
`AnalystInterface`: the same names, the same parameters, results of the same shape (`Explanation`,
`Answer`, `Cost`), the same checks and charges — the remote one is the in-process one behind HTTP.

It lives in the light client because the client must import without DuckDB (an analyst holds no
data), and the full package imports the client: so one declaration serves both.

Every call that releases something is charged before any row is read (DESIGN.md §6 "Reserve,
then read"); a refusal before the reservation charges nothing; after it, every failure is the
one generic `RequestFailed` and the charge stands.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from pcor_sql_client.errors import UserError

#: The requests `cost` can price: the calls that charge, each with its target (a key, keys or a point).
PRICED = ("explain_outlier", "explain_outliers", "identify_anomaly", "identify_anomalies", "identify_value")
_BATCH = {"explain_outlier": "explain_outliers", "identify_anomaly": "identify_anomalies"}


def priced(method: str, dataset: str, target: Any) -> tuple[str, tuple[Any, Any]]:
    """The request `cost(method, dataset, target)` prices, as the batch call both handles run:
    (explain_outliers | identify_anomalies | identify_value, (dataset, keys or point)) — one key
    is a batch of one, so a single and a batch request are priced by the same checks."""
    if method not in PRICED:
        raise UserError(f"no cost preview for {str(method)[:40]!r}", f"use one of: {', '.join(PRICED)}")
    if method in _BATCH:
        return _BATCH[method], (dataset, [target])
    return method, (dataset, target)


def deprecated_value(point: Any, options: dict[str, Any]) -> Any:
    """The point of `identify_value(dataset, point)`, also taken from the old `value=` keyword
    for one release (with a DeprecationWarning; removed from `options`)."""
    if "value" in options:
        warnings.warn("the value= keyword is deprecated: pass the point as identify_value(dataset, point)",
                      DeprecationWarning, stacklevel=3)
        old = options.pop("value")
        if point is not None:
            raise UserError("both a point and value= given", "pass the point once: identify_value(dataset, point)")
        point = old
    if point is None:
        raise UserError("identify_value needs a point of the metric space", "e.g. identify_value(d, {'salary': 250000})")
    return point


@runtime_checkable
class Explanation(Protocol):
    """One released explanation (DESIGN.md §6 "Released = context + privacy parameters + the
    key"): the key the analyst gave, the context (attribute → its values), the predicate it
    compiles to, ε, and the conclusion in words; `as_dict()` holds those and the rest of the
    privacy parameters (metric, explanation_sql, epsilon1, accounting, search, samples, verifier,
    utility) as plain JSON values."""

    released: bool
    dataset: str
    key: Any
    context: dict[str, list[Any]]
    predicate: str
    epsilon: float

    @property
    def summary(self) -> str: ...

    @property
    def privacy_summary(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class NotReleased(Protocol):
    """A key of a batch (`explain_outliers`, `sql`) that was charged but could not be released:
    `released` False, the key, the one generic message (nothing about the data: DESIGN.md §6
    "Reserve, then read"), ε and `charged` (an analyst's always stays charged). An
    `Explanation`'s `released` is True."""

    released: bool
    key: Any
    reason: str
    message: str
    epsilon: float
    charged: bool

    @property
    def summary(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class Answer(Protocol):
    """One anomaly answer (DESIGN.md §3): the key or the point asked about (`key`), the
    mechanism's randomized bit (`anomaly`), ε and the notion (`privacy`: dp or sp); `as_dict()`
    adds columns, k, beta, radius, norm."""

    dataset: str
    key: Any
    anomaly: bool
    epsilon: float
    privacy: str

    @property
    def summary(self) -> str: ...

    @property
    def privacy_summary(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class Cost(Protocol):
    """What a request would charge, previewed without charging or reading a row: ε per record or
    point under `notion`, `k` for (ε, k)-SP (else None), how many charges, and their sum."""

    notion: str
    epsilon: float
    k: int | None
    count: int
    total: float

    def as_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class AnalystInterface(Protocol):
    """An analyst's handle: in-process (`pcor_sql.analyst.Analyst`) or over HTTP (`RemoteAnalyst`)."""

    # ---- what may be asked ---------------------------------------------------------------

    def datasets(self) -> list[dict[str, Any]]:
        """The registered datasets this analyst may use — public by registration: each a dict
        of name, key, metrics, attributes, domains (attribute → its frozen values),
        releasable_keys (how many keys may be asked about; None: none declared) and accounting
        (the owner's fixed accounting, or None)."""
        ...

    def me(self) -> dict[str, Any]:
        """This analyst: analyst (the name; None for an unnamed in-process handle), datasets
        (those they may use; None: all), min_epsilon (the least ε per request), max_keys (the
        most keys per request; None: unbounded), max_work (the work cap per request) and usage
        (quota, spent and remaining ε per notion, over all datasets and per dataset)."""
        ...

    def history(self, limit: int | None = None, before: str | None = None) -> list[dict[str, Any]]:
        """This analyst's own requests, oldest first within the page, one dict per release
        (release_id, requested_at, notion, epsilon, k, mechanism, dataset, key, outcome): the
        `limit` most recent (default 100), or those asked before the request `before` (a
        release_id of an earlier page: page backwards)."""
        ...

    def releasable_keys(self, dataset: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """One page of the keys the owner declared releasable for `dataset` (public by that
        declaration, read from the registry, never the data), in their frozen order:
        {dataset, total, offset, keys}; total None (keys empty) when none were declared."""
        ...

    # ---- requests (each charged before any row is read) ----------------------------------

    def sql(self, text: str) -> list[Any]:
        """Run one `EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` statement (keys picked by equality,
        `WHERE id = 42` or `WHERE id IN (42, 43)`; or `IDENTIFY ANOMALY VALUE (...)` about a
        point): a list of `Explanation`s (or `NotReleased`s) or of `Answer`s, in the order of the
        keys given.
        Anything else is refused before the reservation."""
        ...

    def explain_outlier(self, dataset: str, key: Any, **options: Any) -> Explanation:
        """The private explanation of the record with `key` (one of the dataset's releasable
        keys); `options`: epsilon, verifier, verifier_options, search, samples, utility, start,
        by, metric, accounting (unless the owner fixed it)."""
        ...

    def explain_outliers(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[Explanation | NotReleased]:
        """`explain_outlier` for each key, in the order given, each charged ε; a key that cannot
        be released is a `NotReleased` in its place (one key alone raises RequestFailed)."""
        ...

    def identify_anomaly(self, dataset: str, key: Any, **options: Any) -> Answer:
        """The private anomaly answer for the record with `key` (one of the dataset's releasable
        keys, DESIGN.md §6 "What an analyst may ask about"); `options`: beta, radius, epsilon,
        privacy, k, norm, columns."""
        ...

    def identify_anomalies(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[Answer]:
        """`identify_anomaly` for each key, in the order given, each charged ε."""
        ...

    def identify_value(self, dataset: str, point: Mapping[str, float], **options: Any) -> Answer:
        """The private anomaly answer for a point of the metric space (metric → number, e.g.
        {"salary": 250000}), in the data or not: asking reveals nothing by being answered."""
        ...

    def cost(self, method: str, dataset: str, target: Any, **options: Any) -> Cost:
        """What `getattr(self, method)(dataset, target, **options)` would charge, without
        charging or reading a row (data independent): the same checks as the request, then its
        price. `method`: one of `PRICED`."""
        ...
