"""The one shape of query an analyst may send: `SELECT <columns> FROM <dataset> WHERE <key> = <literal>`
(or `<key> IN (<literal>, ...)`), checked on DuckDB's parse tree, never against data.

The analyst names a registered dataset, not a relation, so nothing in the text can reach
another table, and the record selector is reduced to the key values it names: the engine
rebuilds the WHERE clause itself from the registered key column and these values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from pcor_sql.errors import UserError
from pcor_sql.frontend import duckdb_ast as ast
from pcor_sql.frontend.select import parse_select

_EXAMPLE = "e.g. SELECT salary FROM salaries WHERE id = 42 (or id IN (42, 43))"


@dataclass(frozen=True)
class KeyedSelect:
    """A parsed analyst query: the dataset named in FROM, the selected columns, the key column
    the WHERE clause compares, and the distinct key values in the order written."""

    dataset: str
    columns: tuple[str, ...]
    key_column: str
    keys: tuple[Any, ...]


def parse_keyed_select(con: duckdb.DuckDBPyConnection, text: str, *, multiple: bool = False) -> KeyedSelect:
    """Check `text` has the analyst's shape (see the module docstring); UserError otherwise."""
    query = parse_select(con, text, multiple=multiple)
    if query.star or any(name is None for name in query.metric_names):
        raise UserError("an analyst's query selects plain metric columns only", _EXAMPLE)
    node = ast.serialize(con, text)["statements"][0]["node"]
    table = node.get("from_table") or {}
    if table.get("type") != "BASE_TABLE" or table.get("catalog_name") or table.get("schema_name") \
            or table.get("sample") or table.get("at_clause"):
        raise UserError("an analyst's query reads one registered dataset, named plainly after FROM", _EXAMPLE)
    where = node.get("where_clause")
    if where is None:
        raise UserError("an analyst's query picks records by their key", _EXAMPLE)
    column, literals = _key_comparison(where)
    keys: list[Any] = []
    for literal in literals:
        if literal not in keys:
            keys.append(literal)
    return KeyedSelect(table["table_name"], tuple(str(n) for n in query.metric_names), column, tuple(keys))


def _key_comparison(where: dict[str, Any]) -> tuple[str, list[Any]]:
    if where.get("class") == "COMPARISON" and where.get("type") == "COMPARE_EQUAL":
        left, right = where.get("left"), where.get("right")
        if _is_column(right) and not _is_column(left):
            left, right = right, left
        if _is_column(left):
            return _column(left), [_literal(right)]
    if where.get("class") == "OPERATOR" and where.get("type") == "COMPARE_IN":
        first, *rest = where.get("children") or [None]
        if _is_column(first) and rest:
            return _column(first), [_literal(c) for c in rest]
    raise UserError("an analyst's WHERE clause compares the key with literals, and nothing else", _EXAMPLE)


def _is_column(node: Any) -> bool:
    return isinstance(node, dict) and node.get("class") == "COLUMN_REF" and len(node.get("column_names") or []) == 1


def _column(node: dict[str, Any]) -> str:
    return str(node["column_names"][0])


def _literal(node: Any) -> Any:
    literal = node.get("literal") if isinstance(node, dict) and node.get("class") == "CONSTANT" else None
    if not isinstance(literal, dict):
        raise UserError("a key must be a literal number or string", _EXAMPLE)
    kind, text = literal.get("kind"), literal.get("text")
    if kind == "INTEGER":
        return int(text)
    if kind == "STRING":
        return str(text)
    if kind in ("DECIMAL", "DOUBLE", "FLOAT"):
        return float(text)
    raise UserError(f"a key must be a literal number or string, got a {str(kind).lower()}", _EXAMPLE)


def listed_order(con: duckdb.DuckDBPyConnection, selector_sql: str, results: list[Any]) -> list[Any]:
    """`results` (one per selected record) in the order a selector `key IN (5, 2, 9)` or `key = 5`
    lists its keys — as an analyst's come back (DESIGN.md §6) — rather than the table's; any other
    selector leaves them as they are. Only the order changes: each record's search and its coins
    are those of the stable order it ran in."""
    if len(results) < 2:  # one record has one order: no statement parsed for it
        return results
    try:
        where = ast.serialize(con, f"SELECT 1 WHERE {selector_sql}")["statements"][0]["node"]["where_clause"]
        column, keys = _key_comparison(where)
    except (UserError, duckdb.Error, KeyError, IndexError, TypeError):
        return results
    wanted = {k: i for i, k in reversed(list(enumerate(keys)))}

    def position(result: Any) -> int:
        record = getattr(result, "record", None) or {}
        value = record.get(column, getattr(result, "key", None))
        try:
            return wanted.get(value, len(keys))
        except TypeError:  # an unhashable value: not one of the literals
            return len(keys)

    ordered = sorted(results, key=position)
    # A batch's results are a list subclass (its notebook table): keep the class, reorder only.
    return type(results)(ordered) if type(results) is not list else ordered
