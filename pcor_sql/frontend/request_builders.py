"""Building requests from what callers write: a SELECT's text plus options by name.

The Python API, the CLI and the SQL statements all end here, so an option written as text
means the same everywhere: `by="region,product"` is a list of two names, `verifier="lof(k=5)"`
a verifier with an option, `start="a IN ('x')"` a parsed selection. Everything the request
cannot check itself (the SELECT's shape, text to parse) is checked here, with DuckDB's parser;
nothing is executed against data.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import duckdb

from pcor_sql.frontend.option_lists import parse_verifier_spec
from pcor_sql.core.option_spec import fold_word
from pcor_sql.errors import UserError
from pcor_sql.frontend.compact import parse_by
from pcor_sql.frontend.select import SelectQuery, expand_star, parse_select
from pcor_sql.frontend.start_predicate import parse_start_predicate
from pcor_sql.request_values import AnomalyRequest, OutlierRequest, VerifierChoice, VerifierSpec, request_options
from pcor_sql.sqltext.connection import require_connection


def outlier_request(con: duckdb.DuckDBPyConnection, query: str, **options: Any) -> OutlierRequest:
    """`SELECT <metric> FROM <relation> WHERE <record selector>` plus options by name (the
    fields of `OutlierRequest`, and `verifier_options` to merge into the verifier's)."""
    require_connection(con, "outlier_request")
    return outlier_from_select(con, parse_select(con, query), options)


def outlier_from_select(
    con: duckdb.DuckDBPyConnection, q: SelectQuery, options: Mapping[str, Any]
) -> OutlierRequest:
    """The request for an already parsed SELECT (the SQL statement's path: parsed once)."""
    if q.selector_sql is None:
        raise UserError(
            "the query has no WHERE clause picking the record to explain",
            "add one, e.g. SELECT salary FROM salaries WHERE id = 42",
        )
    opts = _known(OutlierRequest, options, extra=("verifier_options",))
    extra_options = opts.pop("verifier_options", None)
    if isinstance(opts.get("by"), str):
        opts["by"] = parse_by(opts["by"])
    if isinstance(opts.get("start"), str):
        opts["start"] = parse_start_predicate(con, opts["start"], None)
    if "verifier" in opts or extra_options:
        opts["verifier"] = verifier_spec(opts.get("verifier", "lof"), extra_options)
    return OutlierRequest(
        relation=q.relation_sql, metric=q.metric_sql[0], selector=q.selector_sql,
        select_list=q.select_list_sql, statement=q.original, **opts,
    )


def anomaly_request(con: duckdb.DuckDBPyConnection, query: str, *,
                    describe_columns: Callable[[str], list[str]] | None = None, **options: Any) -> AnomalyRequest:
    """`SELECT <col>[, <col> ...] FROM <relation> [WHERE <selector>]` plus options by name.
    `describe_columns(select_sql)` names a SELECT's columns where another engine holds the
    relation (to expand `*`); by default `con` describes it."""
    require_connection(con, "anomaly_request")
    return anomaly_from_select(con, parse_select(con, query, multiple=True), options, describe_columns)


def anomaly_from_select(
    con: duckdb.DuckDBPyConnection, q: SelectQuery, options: Mapping[str, Any],
    describe_columns: Callable[[str], list[str]] | None = None,
) -> AnomalyRequest:
    if q.star:
        q = expand_star(con, q, describe_columns)
    expressions = [sql_text for sql_text, name in zip(q.metric_sql, q.metric_names) if name is None]
    if expressions:
        raise UserError(
            f"{expressions[0]} is an expression, not a column",
            "select plain numeric columns (make a view for computed ones)",
        )
    columns = [str(name) for name in q.metric_names]
    opts = _known(AnomalyRequest, options)
    return AnomalyRequest(
        relation=q.relation_sql, columns=tuple(columns), selector=q.selector_sql, statement=q.original, **opts
    )


def verifier_spec(verifier: str | VerifierChoice, options: Mapping[str, Any] | None = None) -> VerifierChoice:
    """A `VerifierSpec` from a name or a spec text such as `lof(k=5)`, with `options` merged
    in (an option given both ways is an error); a verifier object passes through unchanged."""
    if isinstance(verifier, VerifierSpec):
        name, given = verifier.name, verifier.options_dict()
    elif isinstance(verifier, str):
        name, given = parse_verifier_spec(verifier)
    else:
        if options:
            raise UserError("verifier options were given with a verifier object", "set them on the object itself")
        return verifier
    for key, value in dict(options or {}).items():
        key = fold_word(str(key))
        if key in given:
            raise UserError(f"verifier option {key} is given twice", "give each option once")
        given[key] = value
    return VerifierSpec(name, tuple(given.items()))


def _known(cls: type, options: Mapping[str, Any], extra: tuple[str, ...] = ()) -> dict[str, Any]:
    known = request_options(cls)
    unknown = [name for name in options if name not in known and name not in extra]
    if unknown:
        raise UserError(
            f"unknown option {unknown[0]!r} for {cls.__name__}",
            f"known options: {', '.join([*known, *extra])}",
        )
    return dict(options)
