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
import functools
import json
from dataclasses import dataclass
from typing import Any, Iterator

import duckdb

from pcor_sql.errors import InternalError, UserError, require

_LOCATION_KEYS = ("query_location", "query_location_length")


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    try:
        return con.execute(sql, params).fetchall()
    except duckdb.ConnectionException as exc:  # the caller's connection, not our SQL
        raise UserError(f"the DuckDB connection cannot run queries: {exc}", "pass an open connection") from None
    except duckdb.Error as exc:
        raise InternalError(f"DuckDB could not parse or render SQL ({type(exc).__name__}: {exc})") from None


def serialize(con: duckdb.DuckDBPyConnection, text: str) -> dict[str, Any]:
    """The parse of `text` as DuckDB's JSON document: `{"error": bool, "statements": [...]}`,
    or on failure `{"error": true, "error_type": ..., "error_message": ...}` (never raises for
    bad SQL: the caller words the error for its context)."""
    rows = _run(con, "SELECT system.main.json_serialize_sql($1)", [text])
    return json.loads(rows[0][0])


def parse_error(doc: dict[str, Any]) -> str:
    """The first line of DuckDB's message in a failed parse document."""
    message = str(doc.get("error_message") or "the SQL could not be parsed")
    return message.splitlines()[0] if message else message


def wrap(node: dict[str, Any]) -> dict[str, Any]:
    """A one-statement document around a query node, ready for `json_deserialize_sql`."""
    return {"error": False, "statements": [{"node": node, "named_param_map": []}]}


def _render_and_reparse(metrics: int) -> str:
    """One round trip that renders every piece of a SELECT and parses the SELECT they make when
    put back together. $1: the pieces' documents (`metrics` metrics, FROM, WHERE); $2: per
    metric '' or ' AS "name"'. The substrings drop the prefixes `render_select` checks in Python.

    Every function is called as `system.main.<name>`, and no operator, slice or built-in macro
    is used (`||`, `+`, `[i]` and `array_to_string` look functions up by name, the last one
    inside its body): a user macro of such a name would run instead and could change what the
    parser returns. `concat` skips a NULL, so the missing WHERE is a CASE."""
    def text(k: int) -> str:
        return f"system.main.list_extract(texts, {int(k)})"

    select = ", ', ', ".join(f"system.main.substring({text(k)}, 8), system.main.list_extract($2::VARCHAR[], {k})"
                             for k in range(1, int(metrics) + 1)) or "''"
    where = text(metrics + 2)
    return f"""
WITH rendered AS (SELECT system.main.list_transform($1::VARCHAR[],
                                                    lambda d: system.main.json_deserialize_sql(d::JSON)) AS texts)
SELECT texts, system.main.json_serialize_sql(system.main.concat(
    'SELECT ', {select}, ' FROM ', system.main.substring({text(metrics + 1)}, 15),
    CASE WHEN {where} IS NULL THEN '' ELSE system.main.concat(' WHERE ', system.main.substring({where}, 8)) END))
FROM rendered"""


@dataclass(frozen=True)
class RenderedSelect:
    """The pieces of a SELECT as DuckDB writes them, and the parse of their reassembly."""

    metrics: tuple[str, ...]
    relation: str
    selector: str | None
    reassembled: dict[str, Any]


def render_select(
    con: duckdb.DuckDBPyConnection, node: dict[str, Any], metrics: list[dict[str, Any]], aliases_sql: list[str]
) -> RenderedSelect:
    """Render each metric expression, the FROM clause and the WHERE expression of the SELECT
    node `node`, and parse `SELECT <metric><alias>, ... FROM <relation> [WHERE <selector>]` put
    back together from those texts (`aliases_sql`: '' or ' AS "name"' per metric) — all in one
    round trip."""
    require(len(metrics) == len(aliases_sql), "one alias text per metric")
    pieces = [_templates().expression_node(node, e) for e in metrics] + [_templates().relation_node(node)]
    where = node.get("where_clause")
    if where is not None:
        pieces.append(_templates().expression_node(node, where))
    docs = [json.dumps(wrap(n)) for n in pieces]
    texts, reassembled = _run(con, _render_and_reparse(len(metrics)), [docs, aliases_sql])[0]
    require(len(texts) == len(pieces), "DuckDB rendered a different number of statements")
    return RenderedSelect(
        metrics=tuple(strip_prefix(t, "SELECT ") for t in texts[: len(metrics)]),
        relation=strip_prefix(texts[len(metrics)], "SELECT * FROM "),
        selector=strip_prefix(texts[-1], "SELECT ") if where is not None else None,
        reassembled=json.loads(reassembled),
    )


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


@functools.lru_cache(maxsize=1)
def _templates() -> Templates:
    """The templates of this DuckDB version, parsed once on a private connection: they depend
    only on the library, and parsing them on each call would cost two round trips."""
    fresh = duckdb.connect()
    try:
        return Templates(fresh)
    finally:
        fresh.close()


def strip_prefix(text: str, prefix: str) -> str:
    """`text` without `prefix`, which DuckDB's renderer is known to write first."""
    if not text.startswith(prefix):
        raise InternalError(f"DuckDB rendered {text[:40]!r}, expected it to start with {prefix!r}")
    return text[len(prefix):]


def user_syntax_error(doc: dict[str, Any], fix: str) -> UserError:
    return UserError(f"SQL syntax error: {parse_error(doc)}", fix)
