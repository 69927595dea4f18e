"""The one place SQL text is made from names and values.

Identifiers are always double-quoted; values are bound as parameters where DuckDB allows it,
and otherwise rendered by `quote_literal`, the single tested literal renderer.

Type-exact (DESIGN.md §6 "Only data crosses the boundary"): what is written is the value's own
data, never what a subclass says about itself. A subclass of `str` or `int` can override
`__str__`, `__repr__`, `__format__`, `replace` or `__radd__` (`'"' + name` calls the right
operand's `__radd__` first when it subclasses str), and an f-string or `str.replace` on it would
then paste whatever it returns — a stacked statement, say. So every value is first copied to
its exact type by the base class's own method (`str.__str__`, `int.__int__`, `float.__float__`),
which reads the object's data and ignores overrides; `exact` does that, and `type_exact` applies
it to every argument of a SQL builder.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import math
from typing import Any, Callable, TypeVar

import duckdb

from pcor_sql.errors import InternalError, UserError


_F = TypeVar("_F", bound=Callable[..., Any])


def exact(value: Any) -> Any:
    """`value` copied to its exact built-in type when it subclasses str, int (bool is final) or
    float — by the base class's method, which reads the data and ignores every override; lists
    and tuples item by item (into a tuple); anything else unchanged (a builder refuses it)."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, (list, tuple)):
        return tuple(exact(v) for v in value)
    return value


def type_exact(builder: _F) -> _F:
    """Make a SQL builder type-exact: its arguments pass through `exact` first."""

    @functools.wraps(builder)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return builder(*(exact(a) for a in args), **{k: exact(v) for k, v in kwargs.items()})

    return wrapper  # type: ignore[return-value]


def quote_identifier(name: str) -> str:
    """`name` as a double-quoted SQL identifier (embedded quotes doubled)."""
    if not isinstance(name, str) or not name:
        raise UserError(f"invalid column name {name!r}", "name a column of the relation")
    name = str.__str__(name)
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
        return int.__repr__(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise UserError(f"{float.__repr__(value)} cannot be a domain value", "use finite numbers")
        return float.__repr__(value)
    if isinstance(value, decimal.Decimal):
        if not decimal.Decimal.is_finite(value):
            raise UserError("a non-finite decimal cannot be a domain value", "use finite numbers")
        return decimal.Decimal.__str__(value)
    if isinstance(value, str):
        text = str.__str__(value)
        if "\x00" in text:
            raise UserError("a domain value contains a NUL character", "remove it")
        return "'" + text.replace("'", "''") + "'"
    if isinstance(value, _dt.datetime):
        return f"TIMESTAMP '{_dt.datetime.isoformat(value, ' ')}'"
    if isinstance(value, _dt.date):
        return f"DATE '{_dt.date.isoformat(value)}'"
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
