"""What an analyst may send, checked before anything is reserved (DESIGN.md §6 "Only data
crosses the boundary", §8 "Inputs are exact"): plain data of exact type, valid text, keys of their
key column's JSON type, a start within the frozen domains. Each check reads the request and the
registry only — never a row — so a refusal says nothing about the data.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from pcor_sql.core.option_spec import text_problem
from pcor_sql.errors import UserError
from pcor_sql.ledger.dataset_registry import RegisteredDataset


_PLAIN = (str, int, float, bool, type(None))


def plain_data(value: Any, what: str, depth: int = 0) -> None:
    """Refuse anything but plain data of exact type (JSON's: str, int, float, bool, None, and
    lists and dicts of them, dict keys str): a subclass can override `__str__`, `__eq__` or
    `__hash__`, and any other object can run the caller's code inside the release."""
    kind = type(value)
    if kind in _PLAIN:
        if kind is float and not math.isfinite(value):
            raise UserError(f"{what} is not a finite number", "pass finite numbers")
        if kind is str:
            check_text(value, what)
        return
    if depth < 4 and kind in (list, tuple):
        for item in value:
            plain_data(item, what, depth + 1)
        return
    if depth < 4 and kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise UserError(f"{what} has a key that is not a plain string", "use plain strings as names")
            check_text(key, what)
            plain_data(item, what, depth + 1)
        return
    raise UserError(f"{what} must be plain data (str, int, float, bool, None, lists and dicts of them), "
                    f"got {kind.__name__}", "pass plain values: no subclasses, no objects")


def check_text(value: str, what: str) -> None:
    """Valid Unicode text without NUL (DESIGN.md §8 "Inputs are exact"): a lone surrogate cannot
    be encoded for DuckDB or a response, and a NUL ends C strings early."""
    problem = text_problem(value)
    if problem:
        raise UserError(f"{what} {problem}", "pass valid Unicode text without NUL characters")


def check_start(start: Any, by: Sequence[str], frozen: dict[str, Sequence[str]]) -> None:
    """A start's attributes and values against the domains frozen at registration — data
    independent, so a typo is refused before the reservation; only whether the start holds the
    record and is valid for it (data) is left to the charged part."""
    from pcor_sql.core.selection import domain_indices, resolve_selection

    if not hasattr(start, "items"):
        raise UserError("start must map attributes to lists of values", "e.g. start={'dept': ['a', 'b']}")
    for name, values in resolve_selection(start, by, "start").items():
        if isinstance(values, (str, bytes)) or not values:
            raise UserError(f"start needs a list of values for {name!r}", f"e.g. start={{{name!r}: [...]}}")
        domain_indices(name, frozen[name], values, "registered", f"its values: {', '.join(frozen[name])}")


_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "UHUGEINT", "INT", "LONG", "SHORT", "BYTE")
_NUMBER_TYPES = ("FLOAT", "DOUBLE", "REAL", "DECIMAL", "NUMERIC")


def key_kind(column_type: str) -> str:
    """The JSON kind of a key column (DESIGN.md §8 "Inputs are exact"): "integer" for an integer
    column (a JSON integer), "number" for a float or decimal one (an integer or a number), and
    "string" for every other type — text, and dates, times, UUIDs written as text."""
    base = column_type.upper().split("(")[0].strip()
    if base in _INTEGER_TYPES or base.endswith("INT"):
        return "integer"
    if base in _NUMBER_TYPES:
        return "number"
    return "string"


def check_key_types(keys: Sequence[Any], registered: RegisteredDataset, kind: str) -> None:
    """Every key of the key column's JSON kind, before the reservation: "42" for an integer key
    would pass the releasable check (both are the text "42") and then match no row."""
    allowed = {"integer": (int,), "number": (int, float), "string": (str,)}[kind]
    for key in keys:
        if type(key) not in allowed:
            example = {"integer": "42", "number": "42.5", "string": '"a17"'}[kind]
            raise UserError(f"a key of {registered.name!r} is {_article(kind)} ({registered.key} is {_article(kind)} "
                            f"column), got {_kind_of(key)}", f"send keys as JSON {kind}s, e.g. {example}")


def _article(kind: str) -> str:
    return {"integer": "an integer", "number": "a number", "string": "a string"}[kind]


def _kind_of(key: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string"}.get(type(key), type(key).__name__)


def keys_of(keys: Any) -> tuple[Any, ...]:
    if type(keys) not in (list, tuple):
        raise UserError("keys must be a plain list of key values", "e.g. [42, 43]")
    out: list[Any] = []
    for key in keys:
        # Exact types: a subclass of int or str could say anything about itself (DESIGN.md §6 "Only data
        # crosses the boundary").
        if type(key) not in (int, float, str) or (type(key) is float and not math.isfinite(key)):
            raise UserError(f"a key must be a plain number or string, got {type(key).__name__}", "pass e.g. 42 or 'a17'")
        if type(key) is str:
            check_text(key, "a key")
        if key not in out:
            out.append(key)
    return tuple(out)


def check_page(*, limit: Any, before: Any) -> None:
    """A history page's bounds, as the service's query parameters declare them (DESIGN.md §8
    "Bounded work"): `limit` a whole number 1 to `MAX_HISTORY_PAGE`, `before` a release_id."""
    from pcor_sql.analyst_account import MAX_HISTORY_PAGE, RELEASE_ID_LENGTH

    if limit is not None and (type(limit) is not int or not 1 <= limit <= MAX_HISTORY_PAGE):
        raise UserError(f"limit must be a whole number from 1 to {MAX_HISTORY_PAGE}, got {limit!r}", "pass e.g. limit=100")
    if before is not None and (type(before) is not str or len(before) > RELEASE_ID_LENGTH):
        raise UserError("before must be a release_id (text) from an earlier page", "pass e.g. before=rows[0]['release_id']")
    if type(before) is str:
        check_text(before, "before")
