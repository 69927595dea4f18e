"""`connect(url, token)`: an analyst's handle on a data owner's service, over HTTP — the same
function as `pcor_sql.connect` (which imports it from here).

    import pcor_sql_client          # or: import pcor_sql, then pcor_sql.connect(...)
    analyst = pcor_sql_client.connect("http://127.0.0.1:8000", token)
    analyst.datasets()                                   # what may be asked, and about what
    analyst.explain_outlier("salaries", 42, epsilon=0.2).context
    analyst.identify_value("salaries", {"salary": 250000}, beta=5, radius=1000, epsilon=0.5)
    analyst.sql("EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 WITH (epsilon = 0.2)")
    analyst.cost("explain_outliers", "salaries", [42, 43], epsilon=0.2).total   # nothing charged
    analyst.me()                                         # quotas and spent per notion

The same methods as the in-process handle (`Owner.analyst()`), declared once in
`pcor_sql_client.analyst_interface.AnalystInterface`, but the data, the session and
the ledger stay in the service's process (DESIGN.md §8): this object holds a URL and a token,
sends JSON and receives JSON. The service checks every input (exact types, sizes, releasable
keys, the minimum ε) and charges before it reads a row; its refusals come back as
`pcor_sql_client.errors` exceptions (the very classes `pcor_sql.errors` exports) with the
service's message and fix. Importing or using this module loads no DuckDB: an analyst needs no
data.
"""

from __future__ import annotations

import urllib.parse
import warnings
from typing import Any, Sequence

from pcor_sql_client.analyst_interface import deprecated_value, priced
from pcor_sql_client.errors import UserError
from pcor_sql_client.remote_results import RemoteAnswer, RemoteCost, RemoteExplanation, RemoteNotReleased, released_or_not
from pcor_sql_client.transport import DEFAULT_TIMEOUT, Transport


class RemoteAnalyst:
    """An analyst's connection to a pcor-sql service (see the module docstring). Use it as a
    context manager, or call `close()`, to release the HTTP connection pool. `client`: a
    prepared `httpx.Client` to send through (a proxy, a custom CA bundle for HTTPS)."""

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT, client: Any = None):
        self._transport = Transport(url, token, timeout=timeout, client=client)

    @property
    def url(self) -> str:
        return self._transport.url

    def __repr__(self) -> str:  # never the token
        return f"RemoteAnalyst({self.url!r})"

    def __enter__(self) -> "RemoteAnalyst":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    # ---- what may be asked ---------------------------------------------------------------

    def datasets(self) -> list[dict[str, Any]]:
        """The registered datasets: name, key, metrics, attributes and their frozen domains."""
        return _items(self._transport.get("/v1/datasets"), "datasets")

    def me(self) -> dict[str, Any]:
        """This analyst's quotas and what they have spent, per notion."""
        return self._transport.get("/v1/me")

    def history(self, limit: int | None = None, before: str | None = None) -> list[dict[str, Any]]:
        """This analyst's own requests, with their cost and outcome: the `limit` most recent
        (the service's default: 100), or those asked before the request `before` (a release_id
        of an earlier page: page backwards)."""
        return _items(self._transport.get("/v1/history" + _query(limit=limit, before=before)), "history")

    def releasable_keys(self, dataset: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """One page of the keys the data owner declared releasable for `dataset` (public by that
        declaration): {dataset, total, offset, keys}; page on with offset + len(keys)."""
        return self._transport.get("/v1/releasable-keys" + _query(dataset=dataset, limit=limit, offset=offset))

    # ---- requests ------------------------------------------------------------------------

    def explain_outlier(self, dataset: str, key: Any, **options: Any) -> RemoteExplanation:
        """The private explanation of the record with `key` (one of the dataset's releasable
        keys); `options`: epsilon, verifier, search, samples, utility, start, by."""
        [result] = self.explain_outliers(dataset, [key], **options)
        return result

    def explain_outliers(self, dataset: str, keys: Sequence[Any], **options: Any
                         ) -> list[RemoteExplanation | RemoteNotReleased]:
        """One explanation per key, in the order given, each charged ε. A key that cannot be
        released (missing, no valid context, ...) is a `RemoteNotReleased` in its place, with the
        one generic message (its ε stays charged); one key alone raises RequestFailed instead."""
        body = _keys_body(dataset, keys, options)
        return [released_or_not(item) for item in _items(self._transport.post("/v1/explain", body), "results")]

    def identify_value(self, dataset: str, point: Any = None, **options: Any) -> RemoteAnswer:
        """The mechanism's randomized bit for `point` of the metric space (metric → number, e.g.
        {"salary": 250000}), in the data or not; `options`: beta, radius, epsilon, privacy, k,
        norm. (`value=` for the point is deprecated.)"""
        point = deprecated_value(point, options)
        [answer] = _answers(self._transport.post("/v1/identify", {"dataset": dataset, "value": point, **options}))
        return RemoteAnswer.from_json(answer)

    def identify_anomaly(self, dataset: str, key: Any = None, **options: Any) -> RemoteAnswer:
        """The private anomaly answer for the record with `key` (one of the dataset's releasable
        keys, DESIGN.md §6 "What an analyst may ask about"); `options`: beta, radius, epsilon,
        privacy, k, norm. The old `identify_anomaly(d, value={...})` still asks about a point, with
        a DeprecationWarning: call `identify_value(d, point)`."""
        if "value" in options:
            return self.identify_value(dataset, deprecated_value(None, options), **options)
        [answer] = self.identify_anomalies(dataset, [key], **options)
        return answer

    def identify_anomalies(self, dataset: str, keys: Sequence[Any], **options: Any) -> list[RemoteAnswer]:
        """One answer per key (among the releasable keys), in the order given, each charged ε.
        (A list of points — this method's meaning before it took keys — asks `identify_value`
        about each, with a DeprecationWarning.)"""
        if isinstance(keys, (list, tuple)) and keys and all(type(k) is dict for k in keys):
            warnings.warn("identify_anomalies with points is deprecated: call identify_value(dataset, point) for each",
                          DeprecationWarning, stacklevel=2)
            return [self.identify_value(dataset, point, **options) for point in keys]
        body = _keys_body(dataset, keys, options)
        return [RemoteAnswer.from_json(item) for item in _items(self._transport.post("/v1/identify", body), "results")]

    def sql(self, text: str) -> list[Any]:
        """Run one `EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` statement on the service (`POST
        /v1/sql`): `RemoteExplanation`s or `RemoteAnswer`s, one per key in the order given."""
        if type(text) is not str:
            raise UserError(f"a statement is text, got {type(text).__name__}", "pass the statement as a str")
        results = _items(self._transport.post("/v1/sql", {"sql": text}), "results")
        return [RemoteAnswer.from_json(item) if isinstance(item, dict) and "anomaly" in item
                else released_or_not(item) for item in results]

    def cost(self, method: str, dataset: str, target: Any, **options: Any) -> RemoteCost:
        """What `getattr(self, method)(dataset, target, **options)` would charge, without charging
        or reading a row (data independent), as the in-process handle's `cost`: `method` is one of
        `analyst_interface.PRICED`. A `RemoteCost` (notion, epsilon, k, count, total, dataset)."""
        batch, (dataset, target) = priced(method, dataset, target)
        body = _keys_body(dataset, target, options) if batch != "identify_value" else {"dataset": dataset, "value": target,
                                                                                    **options}
        return RemoteCost.from_json(self._transport.post("/v1/cost" + _query(method=batch), body))


def connect(url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> RemoteAnalyst:
    """An analyst's handle on the pcor-sql service at `url`, authenticated by `token` (the one
    `pcor-sql analyst add` printed). No request is sent until a method is called."""
    return RemoteAnalyst(url, token, timeout=timeout)


def _keys_body(dataset: str, keys: Sequence[Any], options: dict[str, Any]) -> dict[str, Any]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)):
        raise UserError("keys must be a list of key values", "e.g. [42, 43]")
    return {"dataset": dataset, "keys": list(keys), **options}


def _items(payload: Any, name: str) -> list[Any]:
    """A list the service sent, bare or under `name` (`{"results": [...]}`)."""
    if isinstance(payload, dict) and isinstance(payload.get(name), list):
        return payload[name]
    if isinstance(payload, list):
        return payload
    raise UserError(f"the service's answer has no {name!r} list",
                    "the client and the service may be different versions of pcor-sql")


def _answers(payload: Any) -> list[Any]:
    """The one answer of `POST /v1/identify` (`{"results": [answer]}`)."""
    results = _items(payload, "results")
    if len(results) != 1:
        raise UserError(f"the service sent {len(results)} answers for one point",
                        "the client and the service may be different versions of pcor-sql")
    return results


def _query(**params: Any) -> str:
    """`?a=1&b=x` of the parameters given (None: left out), each checked by exact type."""
    given = {k: v for k, v in params.items() if v is not None}
    for name, value in given.items():
        if type(value) not in (int, str) or (type(value) is int and value < 0):
            raise UserError(f"{name} must be a whole number or text, got {value!r}", f"pass e.g. {name}=10")
    return "?" + urllib.parse.urlencode(given) if given else ""
