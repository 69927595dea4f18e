"""DuckDB's own parser as a library: SQL text → JSON AST → SQL text.

`json_serialize_sql(text)` returns the parsed statements as JSON (only SELECT statements can
be serialized); `json_deserialize_sql(json)` renders an AST back to SQL. Pieces of a query
(one expression, the FROM clause) are rendered by placing them into a minimal SELECT node
and removing the known prefix of the rendering, so every piece of SQL text this package
produces from user input was written by DuckDB's renderer, not pasted together from
substrings. Nothing here executes the user's query: parsing and rendering are pure
functions that do not look at the catalog.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterator

import duckdb

from pcor_sql.errors import InternalError, UserError, require

_LOCATION_KEYS = ("query_location", "query_location_length")


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    try:
        return con.execute(sql, params).fetchall()
    except duckdb.Error as exc:
        raise InternalError(f"DuckDB could not parse or render SQL ({type(exc).__name__}: {exc})") from None


def serialize(con: duckdb.DuckDBPyConnection, text: str) -> dict[str, Any]:
    """The parse of `text` as DuckDB's JSON document: `{"error": bool, "statements": [...]}`,
    or on failure `{"error": true, "error_type": ..., "error_message": ...}` (never raises for
    bad SQL: the caller words the error for its context)."""
    rows = _run(con, "SELECT json_serialize_sql($1)", [text])
    return json.loads(rows[0][0])


def parse_error(doc: dict[str, Any]) -> str:
    """The first line of DuckDB's message in a failed parse document."""
    message = str(doc.get("error_message") or "the SQL could not be parsed")
    return message.splitlines()[0] if message else message


def wrap(node: dict[str, Any]) -> dict[str, Any]:
    """A one-statement document around a query node, ready for `json_deserialize_sql`."""
    return {"error": False, "statements": [{"node": node, "named_param_map": []}]}


def render(con: duckdb.DuckDBPyConnection, nodes: list[dict[str, Any]]) -> list[str]:
    """SQL text of each query node, rendered by DuckDB (one round trip for all of them)."""
    if not nodes:
        return []
    docs = [json.dumps(wrap(n)) for n in nodes]
    rows = _run(con, "SELECT list_transform($1::VARCHAR[], lambda d: json_deserialize_sql(d::JSON))", [docs])
    texts = rows[0][0]
    require(len(texts) == len(nodes), "DuckDB rendered a different number of statements")
    return list(texts)


def strip_locations(obj: Any) -> Any:
    """A copy of an AST without source positions, for comparing parses of different texts."""
    if isinstance(obj, dict):
        return {k: strip_locations(v) for k, v in obj.items() if k not in _LOCATION_KEYS}
    if isinstance(obj, list):
        return [strip_locations(v) for v in obj]
    return obj


def walk_expression(expr: Any) -> Iterator[dict[str, Any]]:
    """Every expression node under `expr` (itself included), not descending into subqueries:
    what a subquery computes is its own scope (an aggregate there does not aggregate V's rows)."""
    if isinstance(expr, dict):
        if "class" in expr:
            yield expr
        for key, value in expr.items():
            if key == "subquery":
                continue
            yield from walk_expression(value)
    elif isinstance(expr, list):
        for value in expr:
            yield from walk_expression(value)


def contains_key_value(obj: Any, key: str, predicate: Any) -> bool:
    """True if some dict under `obj` has `key` with a value for which `predicate` holds."""
    if isinstance(obj, dict):
        if key in obj and predicate(obj[key]):
            return True
        return any(contains_key_value(v, key, predicate) for v in obj.values())
    if isinstance(obj, list):
        return any(contains_key_value(v, key, predicate) for v in obj)
    return False


class Templates:
    """Minimal AST pieces taken from DuckDB's own parse (so they match its version's format)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        star_doc = serialize(con, "SELECT * FROM t")
        empty_doc = serialize(con, "SELECT 1")
        if star_doc.get("error") or empty_doc.get("error"):
            raise InternalError("DuckDB failed to parse a fixed template query")
        star_node = star_doc["statements"][0]["node"]
        self.star_list = star_node["select_list"]
        self.empty_from = empty_doc["statements"][0]["node"]["from_table"]

    def expression_node(self, base: dict[str, Any], expr: dict[str, Any]) -> dict[str, Any]:
        """`SELECT <expr>` built on a copy of the (already validated) SELECT node `base`."""
        node = copy.deepcopy(base)
        node["select_list"] = [expr]
        node["from_table"] = copy.deepcopy(self.empty_from)
        node["where_clause"] = None
        return node

    def relation_node(self, base: dict[str, Any]) -> dict[str, Any]:
        """`SELECT * FROM <base's FROM>`."""
        node = copy.deepcopy(base)
        node["select_list"] = copy.deepcopy(self.star_list)
        node["where_clause"] = None
        return node


def strip_prefix(text: str, prefix: str) -> str:
    """`text` without `prefix`, which DuckDB's renderer is known to write first."""
    if not text.startswith(prefix):
        raise InternalError(f"DuckDB rendered {text[:40]!r}, expected it to start with {prefix!r}")
    return text[len(prefix):]


def user_syntax_error(doc: dict[str, Any], fix: str) -> UserError:
    return UserError(f"SQL syntax error: {parse_error(doc)}", fix)
