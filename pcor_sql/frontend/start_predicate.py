"""The user's starting context C_V, written as a predicate: `a IN ('x', 'y') AND b = 2019`.

DuckDB's parser reads it as the WHERE clause of a fixed probe query; the probe's AST without
that WHERE must equal the probe's own AST, so the text cannot have added anything but one
condition (no second statement, no ORDER BY, no UNION...). Only conjunctions of `col IN
(literals)` and `col = literal` are accepted; values come out of the AST as Python values and
are never put back into SQL by this module. Nothing is executed.
"""

from __future__ import annotations

from typing import Any, Sequence

import duckdb

from pcor_sql.core.selection import resolve_name
import pcor_sql.frontend.duckdb_ast as ast
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.tokens import significant, tokenize

_PROBE = "SELECT * FROM __pcor_start_context WHERE "
_FIX = "write it as attr IN ('v1', 'v2') AND other = 'v' (only AND, IN and =, plain values)"


def parse_start_predicate(
    con: duckdb.DuckDBPyConnection, text: str, attributes: Sequence[str] | None
) -> dict[str, list[Any]]:
    """attribute → the values the start context selects, in the order written.

    `attributes` are the context attributes; a column outside them is an error, and names
    match case-insensitively (as SQL identifiers do) and come back spelled as in
    `attributes`. With `attributes=None` only the form is checked. Values are str, int,
    float or bool as the literals say; whether they belong to the declared domains is for
    the caller to check."""
    if not isinstance(text, str) or not text.strip():
        raise UserError("the start context is empty", _FIX)
    if any(t.is_punct(";") for t in significant(tokenize(text))):
        raise UserError("the start context must be a single condition, it contains ';'", _FIX)
    doc = ast.serialize(con, _PROBE + text)
    if doc.get("error"):
        raise UserError(f"the start context is not a valid condition: {ast.parse_error(doc)}", _FIX)
    statements = doc.get("statements") or []
    if len(statements) != 1:
        raise UserError("the start context must be a single condition, not several statements", _FIX)
    node = statements[0]["node"]
    probe = ast.serialize(con, _PROBE.removesuffix(" WHERE "))["statements"][0]["node"]
    rest = dict(node)
    rest["where_clause"] = None
    if statements[0].get("named_param_map") or ast.strip_locations(rest) != ast.strip_locations(probe):
        raise UserError("the start context must be a condition only (no other SQL clauses)", _FIX)
    out: dict[str, list[Any]] = {}
    for attr, values in _conjuncts(node.get("where_clause")):
        name = _resolve(attr, attributes)
        if name in out:
            raise UserError(f"the start context constrains {name} twice", f"list all its values once: {name} IN (...)")
        unique: list[Any] = []
        for v in values:
            if not any(type(v) is type(u) and v == u for u in unique):
                unique.append(v)
        out[name] = unique
    return out


def _conjuncts(expr: dict[str, Any] | None) -> list[tuple[str, list[Any]]]:
    if expr is None:
        raise UserError("the start context is empty", _FIX)
    cls, typ = expr.get("class"), expr.get("type")
    if cls == "CONJUNCTION" and typ == "CONJUNCTION_AND":
        return [item for child in expr["children"] for item in _conjuncts(child)]
    if cls == "CONJUNCTION" and typ == "CONJUNCTION_OR":
        raise UserError("OR is not allowed in a start context", "list alternatives of one attribute with IN: a IN ('x', 'y')")
    if cls == "OPERATOR" and typ == "COMPARE_IN":
        children = expr["children"]
        return [(_column(children[0]), [_literal(c) for c in children[1:]])]
    if cls == "COMPARISON" and typ == "COMPARE_EQUAL":
        left, right = expr["left"], expr["right"]
        if left.get("class") == "CONSTANT" and right.get("class") == "COLUMN_REF":
            left, right = right, left
        return [(_column(left), [_literal(right)])]
    if cls == "OPERATOR" and typ == "OPERATOR_NOT":
        raise UserError("NOT is not allowed in a start context", "list the values the context selects: a IN ('x', 'y')")
    raise UserError(f"the start context contains a condition of an unsupported kind ({typ or cls})", _FIX)


def _column(expr: dict[str, Any]) -> str:
    if expr.get("class") != "COLUMN_REF":
        raise UserError("the left side of each start condition must be an attribute name", _FIX)
    names = expr.get("column_names") or []
    if len(names) != 1:
        raise UserError(
            f"the start context names {'.'.join(names)}, a qualified column",
            "write the attribute name alone, without a table prefix",
        )
    return str(names[0])


def _literal(expr: dict[str, Any]) -> Any:
    if expr.get("class") == "CONSTANT" and "literal" not in expr:
        raise InternalError("DuckDB's AST holds a constant in an unknown format (expected DuckDB 2.x)")
    if expr.get("class") != "CONSTANT":
        raise UserError(
            "start values must be plain literals (strings in single quotes, numbers, TRUE/FALSE)",
            "write e.g. job_title IN ('Nurse', 'Professor') AND year = 2019",
        )
    kind, text = expr["literal"].get("kind"), str(expr["literal"].get("text"))
    if kind == "STRING":
        return text
    if kind == "INTEGER":
        return int(text)
    if kind == "NUMERIC":
        return float(text)
    if kind == "BOOLEAN":
        return text.lower() == "true"
    if kind == "NULL_LITERAL":
        raise UserError("NULL cannot be in a start context (rows with NULL are in no population)", "remove it")
    raise UserError(f"unsupported value kind {kind} in the start context", _FIX)


def _resolve(name: str, attributes: Sequence[str] | None) -> str:
    return name if attributes is None else resolve_name(name, attributes, "the start context")
