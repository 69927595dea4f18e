"""Rewrites of a parsed SELECT into the queries a release runs and the one it shows.

Each rewrite reuses the pieces DuckDB rendered (`SelectQuery`), so the FROM clause keeps its
aliases and a qualified metric such as `s.salary` stays valid. Predicates passed in are SQL
text compiled by the engine from contexts (identifiers quoted, values quoted by the single
tested literal renderer); they are placed as the whole WHERE clause, so no precedence can
mix them with anything else.
"""

from __future__ import annotations

from typing import Sequence

from pcor_sql.errors import InternalError
from pcor_sql.frontend.select import SelectQuery
from pcor_sql.sqltext.build import over_context, select_from
from pcor_sql.sqltext.quoting import quote_identifier

METRIC_ALIAS_PREFIX = "__pcor_metric_"


def metric_alias(i: int) -> str:
    """The result-column name `record_sql` gives the i-th metric that has no alias of its own."""
    return f"{METRIC_ALIAS_PREFIX}{i}"


def population_sql(q: SelectQuery, context_where: str | None) -> str:
    """`SELECT <metric> FROM <relation> WHERE <context predicate>`: the metric over D_C."""
    return over_context(q.select_list_sql, q.relation_sql, context_where)


def explanation_sql(q: SelectQuery, predicate_sql: str | None) -> str:
    """The released explanation as a runnable query (see `sqltext.build.over_context`)."""
    return over_context(q.select_list_sql, q.relation_sql, predicate_sql)


def record_sql(q: SelectQuery, extra_columns: Sequence[str] = (), *, ordered: bool = False) -> str:
    """`SELECT <metric> AS ..., <columns> FROM <relation> [WHERE <selector>]`: the record(s) V.

    Result columns, by position: one per metric (named by the user's alias, else
    `metric_alias(i)`), then `extra_columns` in order (quoted identifiers). With `ordered`,
    `ORDER BY ALL` makes the order of several records independent of DuckDB's scan
    parallelism (rows that tie are identical, so their order cannot matter). A `*` query
    has no metric to name: expand it first (the columns then come from the relation)."""
    if q.star:
        raise InternalError("record_sql needs explicit metric columns; expand the * first")
    items = []
    for i, (sql, alias) in enumerate(zip(q.metric_sql, q.metric_aliases)):
        items.append(f"{sql} AS {quote_identifier(alias or metric_alias(i))}")
    items.extend(quote_identifier(c) for c in extra_columns)
    return select_from(items, q.relation_sql, where=q.selector_sql, order_by="ALL" if ordered else None)
