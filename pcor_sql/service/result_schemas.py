"""The JSON Schemas of what the service answers, derived from the result types themselves
(DESIGN.md §8): an `AnalystExplanation`, an `AnalystAnswer`, a `RequestCost` — their dataclass
fields and the plain-words properties their `as_dict` adds. A field added to a result is in the
OpenAPI document at once, so the document cannot fall behind what crosses the analyst boundary.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Mapping, Union

from pcor_sql.analyst_keys import RequestCost
from pcor_sql.core.choices import Notion
from pcor_sql.results import AnalystAnswer, AnalystExplanation

_SCALARS: dict[Any, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}
#: A key is given as the key column's JSON kind, and sent back as it was given.
KEY = {"type": ["integer", "number", "string"]}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one Python annotation: scalars, `X | None`, tuples and lists, str-keyed
    dicts; anything else (`Any`) is left open."""
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        parts = [type_schema(a) for a in args if a is not type(None)]
        if len(parts) == 1 and "type" in parts[0] and type(None) in args:
            return {**parts[0], "type": [parts[0]["type"], "null"]}
        return {"anyOf": parts + ([{"type": "null"}] if type(None) in args else [])}
    if origin in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        return {"type": "array", **({"items": type_schema(items[0])} if len(items) == 1 else {})}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1]) if args else {}}
    return {}


def result_schema(cls: type, description: str, *, hidden: tuple[str, ...] = (), renamed: Mapping[str, str] = {},
                  given: Mapping[str, dict[str, Any]] = {}) -> dict[str, Any]:
    """The object schema of `cls.as_dict()`: its `summary` / `privacy_summary` properties first
    (when it has them), then its fields (but `hidden`: those `as_dict` leaves out), a field
    `renamed` as the service names it; `given`: a field's schema where its annotation says
    less than the service promises (a key, an enum)."""
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    for name in ("summary", "privacy_summary"):
        prop = getattr(cls, name, None)
        if isinstance(prop, property):
            properties[name] = type_schema(typing.get_type_hints(prop.fget)["return"])
    for f in dataclasses.fields(cls):
        if f.name not in hidden:
            shown = renamed.get(f.name, f.name)
            properties[shown] = given.get(shown, type_schema(hints[f.name]))
    return {"type": "object", "description": description, "properties": properties}


EXPLANATION = result_schema(
    AnalystExplanation, "one released explanation: the key given, the context, its predicate and SQL, the privacy "
                        "parameters", hidden=("full_attributes", "ranges"),
    given={"key": KEY, "context": {"type": "object", "additionalProperties": {"type": "array"}}})
_POINT = {"type": "object", "additionalProperties": {"type": "number"}}
_ANSWER = result_schema(AnalystAnswer, "the mechanism's randomized bit for the key or the point asked about, with the "
                                       "privacy parameters", given={"key": {"anyOf": [KEY, _POINT]}})
#: An answer about a point also names it `value` (`POST /v1/identify` with a value, as it always has).
ANSWER = {**_ANSWER, "properties": {**_ANSWER["properties"], "value": {**_POINT, "description": "the point asked about "
                                                                                               "(answers about a point)"}}}
_COST = result_schema(RequestCost, "what the request would charge (nothing is charged, no row is read)",
                      given={"notion": {"type": "string", "enum": [str(n) for n in Notion]}})
#: `POST /v1/cost` answers the dataset asked about, then the cost.
COST = {**_COST, "properties": {"dataset": {"type": "string"}, **_COST["properties"]}}
