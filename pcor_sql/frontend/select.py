"""`SELECT <metric> FROM <relation> [WHERE <record selector>]`, parsed by DuckDB's parser.

The projected expression is the metric M, the FROM clause is the dataset D, the WHERE clause
picks the record(s) V (DESIGN.md §2). Anything that would make "a row of D" mean something
else — grouping, aggregates, windows, DISTINCT, ORDER/LIMIT, sampling, set operations, CTEs,
parameters — is refused with the fix, because the rewrites put the FROM clause under other
WHERE clauses and must keep its rows the same rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import duckdb

import pcor_sql.frontend.duckdb_ast as ast
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import describe, select_from
from pcor_sql.sqltext.connection import relation_fix
from pcor_sql.sqltext.quoting import quote_identifier
from pcor_sql.sqltext.tokens import split_statements

_SYNTAX_FIX = "check the SELECT: it must read SELECT <metric> FROM <relation> [WHERE <record selector>]"
_SHAPE_FIX = "write SELECT <metric> FROM <relation> WHERE <record selector>"

_MODIFIERS = {
    "ORDER_MODIFIER": "ORDER BY",
    "LIMIT_MODIFIER": "LIMIT/OFFSET",
    "LIMIT_PERCENT_MODIFIER": "LIMIT ... PERCENT",
    "DISTINCT_MODIFIER": "DISTINCT",
}

# Set-returning in a select list: one input row would become several "records".
_ROW_MULTIPLYING = frozenset({"unnest", "generate_subscripts"})


@dataclass(frozen=True)
class SelectQuery:
    """A validated `SELECT <metric(s)> FROM <relation> [WHERE <selector>]`.

    Every text field was rendered by DuckDB from the parsed AST:
    - `metric_sql`: each projected expression, without its alias (e.g. `s.salary`, `(a + b)`);
    - `metric_names`: the column name of a plain column reference (`salary` for `s.salary`),
      else None; `metric_aliases`: the `AS` name the user gave, else None;
    - `relation_sql`: the FROM clause, usable after `FROM` (aliases kept, so qualified metric
      references stay valid);
    - `selector_sql`: the WHERE expression, or None (then every row is selected);
    - `star`: the select list is `*`/`t.*`/`COLUMNS(...)` (only when `multiple=True`);
      `metric_sql` then holds that one star expression;
    - `original`: the text as the user wrote it.
    """

    original: str
    metric_sql: tuple[str, ...]
    metric_names: tuple[str | None, ...]
    metric_aliases: tuple[str | None, ...]
    relation_sql: str
    selector_sql: str | None
    star: bool = False

    @property
    def select_list_sql(self) -> str:
        """The projection as written back: `expr [AS alias], ...`. Aliases are kept because
        DuckDB lets the WHERE clause refer to them."""
        return ", ".join(_aliased(sql, alias) for sql, alias in zip(self.metric_sql, self.metric_aliases))

    @property
    def metric_labels(self) -> tuple[str, ...]:
        """A display name per metric: its alias, else its column name, else its SQL."""
        return tuple(a or n or s for s, n, a in zip(self.metric_sql, self.metric_names, self.metric_aliases))


def _aliased(sql: str, alias: str | None) -> str:
    return sql if alias is None else f"{sql} AS {quote_identifier(alias)}"


def parse_select(con: duckdb.DuckDBPyConnection, text: str, *, multiple: bool = False) -> SelectQuery:
    """Parse and validate `text` with DuckDB's parser.

    `multiple=False` (EXPLAIN OUTLIER): exactly one metric expression, no `*`.
    `multiple=True` (IDENTIFY ANOMALY): one or more expressions, `*` allowed.
    Raises UserError naming what is not allowed and the fix.
    """
    if not isinstance(text, str) or not text.strip():
        raise UserError("the query is empty", _SHAPE_FIX)
    parts = split_statements(text)
    if len(parts) > 1:
        raise UserError(
            f"the query holds {len(parts)} statements, one SELECT is expected",
            "remove the ';' and everything after it (run other statements separately)",
        )
    doc = ast.serialize(con, text)
    if doc.get("error"):
        if "Only SELECT" in str(doc.get("error_message", "")):
            raise UserError("only a SELECT query can be explained", _SHAPE_FIX)
        raise ast.user_syntax_error(doc, _SYNTAX_FIX)
    statements = doc.get("statements") or []
    if not statements:
        raise UserError("the query is empty", _SHAPE_FIX)
    if len(statements) > 1:
        raise UserError(
            f"the query holds {len(statements)} statements, one SELECT is expected",
            "remove the ';' and everything after it (run other statements separately)",
        )
    statement = statements[0]
    if statement.get("named_param_map"):
        raise UserError("the query has parameters ($1, ?)", "write the values into the query as literals")
    node = statement["node"]
    _check_shape(node)
    select_list = node["select_list"]
    star = _check_select_list(con, select_list, multiple)
    return _render(con, text, node, star)


def _check_shape(node: dict[str, Any]) -> None:
    node_type = node.get("type")
    if node_type == "SET_OPERATION_NODE":
        raise UserError(
            "UNION/EXCEPT/INTERSECT is not allowed in the explained query",
            "put the combined query in the FROM clause: SELECT m FROM (SELECT ... UNION ...) AS d WHERE ...",
        )
    if node_type != "SELECT_NODE":
        raise UserError(f"this kind of query ({node_type}) cannot be explained", _SHAPE_FIX)
    if (node.get("cte_map") or {}).get("map"):
        raise UserError(
            "WITH (a common table expression) is not allowed in the explained query",
            "create a view (CREATE VIEW d AS ...) or put the query in FROM (...) AS d",
        )
    for modifier in node.get("modifiers") or []:
        name = _MODIFIERS.get(modifier.get("type"), modifier.get("type"))
        raise UserError(
            f"{name} is not allowed in the explained query",
            "remove it: the WHERE clause alone selects the record(s); every row of FROM is the dataset",
        )
    if node.get("group_expressions") or node.get("group_sets") or node.get("aggregate_handling") not in (None, "STANDARD_HANDLING"):
        raise UserError(
            "GROUP BY is not allowed in the explained query",
            "explain a row-level metric; to explain an aggregate, compute it in a view and select from that view",
        )
    if node.get("having") is not None:
        raise UserError("HAVING is not allowed in the explained query", "use WHERE to select the record(s)")
    if node.get("qualify") is not None:
        raise UserError("QUALIFY is not allowed in the explained query", "use WHERE to select the record(s)")
    if node.get("sample") is not None or ast.contains_key_value(node.get("from_table"), "sample", lambda v: v is not None):
        raise UserError(
            "sampling (USING SAMPLE/TABLESAMPLE) is not allowed in the explained query",
            "the dataset must be a fixed set of rows: sample into a table first and explain over it",
        )
    if (node.get("from_table") or {}).get("type") == "EMPTY":
        raise UserError("the query has no FROM clause", "name the relation: SELECT <metric> FROM <table> ...")
    _check_no_comma_join(node.get("from_table"))


def _check_no_comma_join(ref: dict[str, Any] | None) -> None:
    """`FROM a, b WHERE a.id = b.id` is the usual way to join, but here the FROM clause alone
    is the dataset: its rows would be every pairing of a and b, and the join condition would
    only select the record. An explicit CROSS JOIN says the cross product is meant; a comma
    before a table function (`t, unnest(...)`) is a lateral expansion and kept."""
    if not ref or ref.get("type") != "JOIN":
        return
    if ref.get("ref_type") == "CROSS" and ref.get("is_implicit") and (ref.get("right") or {}).get("type") != "TABLE_FUNCTION":
        raise UserError(
            "a comma join in FROM makes the dataset every pairing of rows (the WHERE clause only selects the record)",
            "join with FROM a JOIN b ON <condition> (or write CROSS JOIN if the cross product is meant)",
        )
    _check_no_comma_join(ref.get("left"))
    _check_no_comma_join(ref.get("right"))


def _check_select_list(con: duckdb.DuckDBPyConnection, select_list: list[dict[str, Any]], multiple: bool) -> bool:
    stars = [e for e in select_list if e.get("class") == "STAR"]
    if stars:
        if not multiple:
            raise UserError(
                "SELECT * does not name a metric",
                "select exactly one numeric column or expression: SELECT salary FROM ...",
            )
        if len(select_list) > 1:
            raise UserError("a * cannot be combined with other expressions", "list the columns by name instead")
        if stars[0].get("replace_list") or stars[0].get("rename_list"):
            raise UserError("* REPLACE/RENAME is not supported here", "list the columns by name instead")
        return True
    if not multiple and len(select_list) != 1:
        raise UserError(
            f"the query selects {len(select_list)} expressions, one metric is expected",
            "select exactly one numeric column or expression: SELECT salary FROM ...",
        )
    called: set[str] = set()
    for expr in select_list:
        for sub in ast.walk_expression(expr):
            cls = sub.get("class")
            if cls == "WINDOW":
                raise UserError("a window function (OVER ...) is not allowed in the metric", _row_level_fix())
            if cls == "FUNCTION":
                name = str(sub.get("function_name", "")).lower()
                if sub.get("distinct") or sub.get("filter") is not None or (sub.get("order_bys") or {}).get("orders"):
                    raise UserError(f"the aggregate {name}(...) is not allowed in the metric", _row_level_fix())
                if name in _ROW_MULTIPLYING:
                    raise UserError(
                        f"{name}(...) turns one row into several and is not allowed in the metric",
                        "unnest in a view or in a subquery in FROM, then select the column",
                    )
                called.add(name)
    aggregates = _aggregate_names(con, called)
    if aggregates:
        raise UserError(f"the aggregate {sorted(aggregates)[0]}(...) is not allowed in the metric", _row_level_fix())
    return False


def _row_level_fix() -> str:
    return "the metric is a per-row value (e.g. SELECT salary ...); compute aggregates in a view and select from it"


@functools.lru_cache(maxsize=1)
def _builtin_functions() -> tuple[frozenset[str], frozenset[str]]:
    """(every built-in function name, the built-in aggregate names) of this DuckDB version,
    read once from a fresh connection: listing functions costs tens of milliseconds."""
    fresh = duckdb.connect()
    try:
        rows = fresh.execute("SELECT DISTINCT lower(function_name), function_type FROM duckdb_functions()").fetchall()
    finally:
        fresh.close()
    return frozenset(r[0] for r in rows), frozenset(r[0] for r in rows if r[1] == "aggregate")


def _called_functions(expr: Any) -> set[str]:
    """Names of the functions an expression calls (outside subqueries), lower-cased."""
    return {str(e.get("function_name", "")).lower() for e in ast.walk_expression(expr) if e.get("class") == "FUNCTION"}


def _aggregate_names(con: duckdb.DuckDBPyConnection, names: set[str]) -> set[str]:
    """Which of `names` are aggregate functions, or macros that call one. Names a fresh
    DuckDB does not know (from extensions or user definitions) are looked up in this
    connection's catalog, and macro bodies are followed."""
    builtin, builtin_aggregates = _builtin_functions()
    found = names & builtin_aggregates
    # name -> the names (among `names`) whose definition reaches it
    reached_from: dict[str, set[str]] = {n: {n} for n in names - builtin}
    pending = set(reached_from)
    while pending:
        try:
            rows = con.execute(
                "SELECT system.main.lower(function_name), function_type, macro_definition FROM system.main.duckdb_functions() "
                "WHERE system.main.list_contains($1::VARCHAR[], system.main.lower(function_name))",
                [sorted(pending)],
            ).fetchall()
        except duckdb.Error as exc:
            raise InternalError(f"could not list DuckDB's functions: {exc}") from None
        pending = set()
        for name, function_type, definition in rows:
            origins = reached_from.get(name, set())
            if function_type == "aggregate":
                found |= origins
            elif function_type == "macro" and definition:
                doc = ast.serialize(con, f"SELECT {definition}")
                if doc.get("error") or not doc.get("statements"):
                    continue
                called = _called_functions(doc["statements"][0]["node"]["select_list"])
                if called & builtin_aggregates:
                    found |= origins
                for callee in called - builtin:
                    if callee not in reached_from:
                        reached_from[callee] = set()
                        pending.add(callee)
                    reached_from[callee] |= origins
    return found


def _render(con: duckdb.DuckDBPyConnection, text: str, node: dict[str, Any], star: bool) -> SelectQuery:
    select_list = node["select_list"]
    bare = [{**expr, "alias": ""} for expr in select_list]
    aliases = tuple(e.get("alias") or None for e in select_list)
    rendered = ast.render_select(con, node, bare, [_aliased("", alias) for alias in aliases])
    names = tuple(
        e["column_names"][-1] if e.get("class") == "COLUMN_REF" and e.get("column_names") else None for e in select_list
    )
    query = SelectQuery(
        original=text,
        metric_sql=rendered.metrics,
        metric_names=names,
        metric_aliases=aliases,
        relation_sql=rendered.relation,
        selector_sql=rendered.selector,
        star=star,
    )
    _check_round_trip(rendered.reassembled, node)
    return query


def _check_round_trip(doc: dict[str, Any], node: dict[str, Any]) -> None:
    """The pieces, put back together, must parse to the very AST the user's text parsed to:
    then every rewrite that reuses them means what the user wrote. DuckDB's renderer
    normalizes a few constructs (e.g. a VALUES list in FROM becomes a subquery), which this
    refuses rather than guess. `doc` is the parse of `SELECT <select_list_sql> FROM
    <relation_sql> [WHERE <selector_sql>]`, made in the round trip that rendered the pieces."""
    same = (
        not doc.get("error")
        and len(doc.get("statements") or []) == 1
        and ast.strip_locations(doc["statements"][0]["node"]) == ast.strip_locations(node)
    )
    if not same:
        raise UserError(
            "DuckDB cannot write this query back to SQL unchanged, so it cannot be rewritten safely",
            "create a view over the FROM clause (CREATE VIEW d AS SELECT ...) and explain SELECT <metric> FROM d WHERE ...",
        )


def expand_star(con: duckdb.DuckDBPyConnection, q: SelectQuery,
                describe_columns: Callable[[str], list[str]] | None = None) -> SelectQuery:
    """`SELECT * ...` (or `t.*`, `* EXCLUDE (...)`, `COLUMNS(...)`) with the star replaced by
    the columns it stands for, named explicitly, so each can be read and checked. Reads only
    the relation's schema (DESCRIBE, or `describe_columns(select_sql)` where another engine
    holds the relation); a query without a star is returned unchanged."""
    if not q.star:
        return q
    select_sql = select_from(q.metric_sql[0], q.relation_sql)
    if describe_columns is not None:
        try:
            names = [str(n) for n in describe_columns(select_sql)]
        except UserError as exc:
            raise UserError(f"cannot list the columns of {q.metric_sql[0]}: {exc.problem}", exc.fix) from None
    else:
        try:
            rows = con.execute(describe(select_sql)).fetchall()
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(
                f"cannot list the columns of {q.metric_sql[0]}: {first}",
                relation_fix(exc, "check the FROM clause and the column names"),
            ) from None
        names = [str(r[0]) for r in rows]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UserError(
            f"{q.metric_sql[0]} yields several columns named {repeated[0]!r}",
            "name the columns instead of *, qualified by table alias (SELECT s.a, t.b ...)",
        )
    doc = ast.serialize(con, select_sql)
    star = doc["statements"][0]["node"]["select_list"][0]
    prefix = quote_identifier(star["relation_name"]) + "." if star.get("relation_name") else ""
    columns = [prefix + quote_identifier(n) for n in names]
    expanded = parse_select(con, select_from(columns, q.relation_sql, where=q.selector_sql), multiple=True)
    return SelectQuery(
        original=q.original,
        metric_sql=expanded.metric_sql,
        metric_names=expanded.metric_names,
        metric_aliases=expanded.metric_aliases,
        relation_sql=expanded.relation_sql,
        selector_sql=expanded.selector_sql,
        star=False,
    )
