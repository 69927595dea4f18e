"""The one place SQL text is made from names and values.

Identifiers are always double-quoted; values are bound as parameters where DuckDB allows it,
and otherwise rendered by `quote_literal`, the single tested literal renderer.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from typing import Any

import duckdb

from pcor_sql.errors import InternalError, UserError


def quote_identifier(name: str) -> str:
    """`name` as a double-quoted SQL identifier (embedded quotes doubled)."""
    if not isinstance(name, str) or not name:
        raise UserError(f"invalid column name {name!r}", "name a column of the relation")
    if "\x00" in name:
        raise UserError("a column name contains a NUL character", "rename the column")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: Any) -> str:
    """A SQL literal for a domain value: strings single-quoted with quotes doubled, numbers
    in their exact text, booleans, dates and NULL. Anything else is refused."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise UserError(f"{value!r} cannot be a domain value", "use finite numbers")
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise UserError("a domain value contains a NUL character", "remove it")
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, _dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, _dt.date):
        return f"DATE '{value.isoformat()}'"
    raise UserError(f"unsupported domain value type {type(value).__name__}", "use strings, numbers, booleans or dates")


def string_literals(sql: str) -> list[str]:
    """The values of the string constants in `sql`, in order: the inverse of `quote_literal` on
    strings. DuckDB's own tokenizer finds them, so no second lexer has to agree with it."""
    data = sql.encode("utf-8")
    tokens = duckdb.tokenize(sql)
    # Token offsets count UTF-8 bytes; a constant ends where the next token starts, less spaces.
    ends = [start for start, _ in tokens[1:]] + [len(data)]
    values = []
    for (start, kind), end in zip(tokens, ends):
        if kind != duckdb.token_type.string_const:
            continue
        text = data[start:end].decode("utf-8").rstrip()
        if len(text) < 2 or text[0] != "'" or text[-1] != "'":
            raise InternalError(f"DuckDB's tokenizer gave {text!r} as a string constant of {sql!r}")
        values.append(text[1:-1].replace("''", "'"))
    return values
