"""What an analyst may send the service: JSON checked by exact type and size before anything
else (DESIGN.md §6 "Only data crosses the boundary", §8).

The request bodies are JSON Schema objects generated from the option specs — the options an
analyst may set (`request_specs.analyst_options`), plus the analyst handle's own words (the
dataset, the keys or the value, `metric`, `verifier_options`). One schema serves both the
OpenAPI document and the check of every body (`check`), so the two cannot disagree. The check
is by exact Python type of the parsed JSON (`type(x) is int`: a bool is not a number, a float not
a count), with bounded sizes: body bytes, keys per request, text length, nesting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from pcor_sql.core.option_spec import Kind, OptionSpec, parse_choice, text_problem
from pcor_sql.errors import UserError
from pcor_sql.request_specs import Job, analyst_options, specs_for

#: The largest integer key: DuckDB's BIGINT range (a key beyond it names no row of any table).
KEY_BOUND = 2**63 - 1
NAME_LENGTH = 128
#: The schema keyword (an OpenAPI extension) listing a fixed-value option's canonical values.
CHOICES = "x-choices"


@dataclass(frozen=True)
class Limits:
    """Sizes the service accepts: keys per request, characters per text, bytes per body."""

    max_keys: int = 100
    max_text: int = 1000
    max_body: int = 64 * 1024


class BadRequest(UserError):
    """Input refused before anything else happens (nothing read, nothing charged); `status`
    is the HTTP code (400, 413 too large, 415 not JSON)."""

    def __init__(self, problem: str, fix: str, status: int = 400):
        super().__init__(problem, fix)
        self.status = status


# ---- the schemas, from the specs -----------------------------------------------------------


def _option_schema(spec: OptionSpec, limits: Limits) -> dict[str, Any]:
    """The JSON Schema of one option, by its kind (structured options by name)."""
    if spec.kind is Kind.STRUCTURED:
        text = {"type": "string", "maxLength": limits.max_text}
        if spec.name == "by":
            schema: dict[str, Any] = {"anyOf": [text, {"type": "array", "items": {"type": "string", "maxLength": NAME_LENGTH},
                                                       "minItems": 1, "maxItems": 64}]}
        elif spec.name == "verifier":
            schema = dict(text)
        else:  # a new structured option must say here how it is written in JSON
            raise KeyError(f"no JSON schema for the structured option {spec.name!r}")
    elif spec.kind is Kind.BOOLEAN:
        schema = {"type": "boolean"}
    elif spec.kind is Kind.STRING:
        schema = {"type": "string", "maxLength": limits.max_text}
        if spec.choices:
            # A fixed-value option in any ASCII case, as on the CLI, in Python and in statements
            # (DESIGN.md §6): the pattern says so to a client, `x-choices` lists the canonical values.
            schema["pattern"] = spec.choice_pattern()
            schema[CHOICES] = [str(c) for c in spec.choices]
    else:
        schema = {"type": "integer" if spec.kind is Kind.INTEGER else "number"}
        if spec.minimum is not None:
            bound = int(spec.minimum) if spec.kind is Kind.INTEGER else float(spec.minimum)
            schema["minimum" if spec.minimum_inclusive else "exclusiveMinimum"] = bound
        if spec.maximum is not None:
            schema["maximum"] = int(spec.maximum) if spec.kind is Kind.INTEGER else float(spec.maximum)
    schema["description"] = spec.help
    if spec.default is not None and not isinstance(spec.default, (list, tuple, dict)):
        schema["default"] = spec.default if isinstance(spec.default, (bool, int, float)) else str(spec.default)
    return schema


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def explain_schema(limits: Limits) -> dict[str, Any]:
    """`POST /v1/explain`: the dataset, the keys, and the options an analyst may set."""
    specs = specs_for(Job.EXPLAIN)
    properties: dict[str, Any] = {
        "dataset": {"type": "string", "maxLength": NAME_LENGTH, "description": "a registered dataset's name"},
        "keys": _keys(limits),
        "metric": {"type": "string", "maxLength": NAME_LENGTH, "description": "one of the dataset's metrics"},
        "verifier_options": {"type": "object", "maxProperties": 16,
                             "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 100},
                                                                {"type": "boolean"}]},
                             "description": "options of the verifier, e.g. {\"k\": 20}"},
    }
    for name in sorted(analyst_options(Job.EXPLAIN)):
        properties[name] = _option_schema(specs[name], limits)
    return _object(properties, ["dataset", "keys", "epsilon"])


def identify_schema(limits: Limits, *, by_key: bool = False) -> dict[str, Any]:
    """`POST /v1/identify`: the dataset, a point of its metric space — or, `by_key`, keys among
    the dataset's releasable keys (DESIGN.md §6 "What an analyst may ask about") — and the options."""
    specs = specs_for(Job.IDENTIFY)
    properties: dict[str, Any] = {
        "dataset": {"type": "string", "maxLength": NAME_LENGTH, "description": "a registered dataset's name"},
    }
    if by_key:
        properties["keys"] = _keys(limits)
    else:
        properties["value"] = {"type": "object", "minProperties": 1, "maxProperties": 16,
                               "additionalProperties": {"type": "number"},
                               "description": "a point: metric column → number (in the data or not), e.g. "
                                              "{\"income\": 50000}"}
    for name in sorted(analyst_options(Job.IDENTIFY)):
        properties[name] = _option_schema(specs[name], limits)
    return _object(properties, ["dataset", "keys" if by_key else "value", "beta", "radius", "epsilon"])


def sql_schema(limits: Limits) -> dict[str, Any]:
    """`POST /v1/sql`: one `EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` statement, as text."""
    return _object({"sql": {"type": "string", "minLength": 1, "maxLength": limits.max_body,
                            "description": "one EXPLAIN OUTLIER or IDENTIFY ANOMALY statement, e.g. \"EXPLAIN "
                                           "OUTLIER SELECT pay FROM staff WHERE id = 7 WITH (epsilon = 0.1)\""}},
                   ["sql"])


def _keys(limits: Limits) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "maxItems": limits.max_keys,
            "items": {"anyOf": [{"type": "integer", "minimum": -KEY_BOUND, "maximum": KEY_BOUND},
                                {"type": "string", "maxLength": limits.max_text}]},
            "description": "the records' keys (among the dataset's releasable keys); results come in this order"}


# ---- parsing and checking ------------------------------------------------------------------


def _no_constants(name: str) -> Any:
    raise BadRequest(f"{name} is not a JSON number", "send finite numbers")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # a proxy might read the first, the service the last: refuse both
            raise BadRequest(f"the field {key[:40]!r} is given twice", "give each field once")
        out[key] = value
    return out


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRequest(f"the number {text[:40]} is out of range", "send finite numbers")
    return value


def parse_body(raw: bytes, limits: Limits) -> dict[str, Any]:
    """The request body as a JSON object: at most `max_body` bytes of UTF-8, no NaN or
    infinities, no repeated field, no number out of range."""
    if len(raw) > limits.max_body:
        raise BadRequest(f"the body is larger than {limits.max_body} bytes", "send a smaller request", 413)
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_no_constants, object_pairs_hook=_pairs,
                          parse_float=_finite)
    except BadRequest:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadRequest("the body is not valid JSON", "send one JSON object, UTF-8 encoded") from None
    if type(body) is not dict:
        raise BadRequest("the body must be a JSON object", 'send e.g. {"dataset": "salaries", ...}')
    return body


_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
          "object": (dict,), "null": (type(None),)}


def check(value: Any, schema: dict[str, Any], where: str) -> None:
    """Raise BadRequest unless `value` fits `schema` (the subset of JSON Schema the service's
    schemas use), by exact type."""
    if "anyOf" in schema:
        failures = []
        for option in schema["anyOf"]:
            try:
                return check(value, option, where)
            except BadRequest as exc:
                failures.append(exc)
        raise failures[-1] if len(failures) == 1 else BadRequest(
            f"{where} has the wrong type ({_kind(value)})",
            f"send {' or '.join(o.get('type', 'a value') for o in schema['anyOf'])}")
    expected = schema["type"]
    if type(value) not in _TYPES[expected]:
        raise BadRequest(f"{where} must be {_article(expected)}, got {_kind(value)}", _example(where, schema))
    if "enum" in schema and value not in schema["enum"]:
        raise BadRequest(f"unknown {where} {value!r}", f"use one of: {', '.join(schema['enum'])}")
    if CHOICES in schema:
        try:  # the spelling rule of the spec itself, never a second one (it matches `pattern`)
            parse_choice(where, value, tuple(schema[CHOICES]))
        except UserError as exc:
            raise BadRequest(exc.problem, exc.fix or "") from None
    if expected == "string":
        if len(value) < schema.get("minLength", 0):
            raise BadRequest(f"{where} is empty", _example(where, schema))
        if len(value) > schema.get("maxLength", len(value)):
            raise BadRequest(f"{where} is longer than {schema['maxLength']} characters", "send a shorter text")
        text(value, where)
    elif expected in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise BadRequest(f"{where} must be ≥ {schema['minimum']}, got {value!r}", _example(where, schema))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise BadRequest(f"{where} must be > {schema['exclusiveMinimum']}, got {value!r}", _example(where, schema))
        if "maximum" in schema and value > schema["maximum"]:
            raise BadRequest(f"{where} must be ≤ {schema['maximum']}", _example(where, schema))
    elif expected == "array":
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            raise BadRequest(f"{where} must hold {schema.get('minItems', 0)} to {schema['maxItems']} items, "
                             f"got {len(value)}", "send fewer items per request" if value else "send at least one")
        for i, item in enumerate(value):
            check(item, schema["items"], f"{where}[{i}]")
    elif expected == "object":
        _check_object(value, schema, where)


def _check_object(value: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    if not schema.get("minProperties", 0) <= len(value) <= schema.get("maxProperties", len(value)):
        raise BadRequest(f"{where} must have {schema.get('minProperties', 0)} to {schema['maxProperties']} fields",
                         "send fewer fields" if value else "send at least one field")
    for name in schema.get("required", []):
        if name not in value:
            raise BadRequest(f"the field {name!r} is missing", _example(name, properties[name]))
    for name, item in value.items():
        if len(name) > NAME_LENGTH:
            raise BadRequest(f"a field name in {where} is longer than {NAME_LENGTH} characters", "use shorter names")
        text(name, f"a field name in {where}")
        if name in properties:
            check(item, properties[name], name)
        elif extra is False:
            raise BadRequest(f"unknown field {name[:40]!r}", f"fields: {', '.join(sorted(properties))}")
        else:
            check(item, extra, f"{where}[{name[:40]!r}]")


def text(value: str, where: str) -> str:
    """`value` if it is valid Unicode text without NUL, else a 400 (DESIGN.md §8 "Inputs are
    exact"): JSON's `\\udfff` escapes decode to lone surrogates, which no UTF-8 encoder (DuckDB's,
    the response's) can write, and a NUL ends a C string early."""
    problem = text_problem(value)
    if problem:
        raise BadRequest(f"{where} {problem}", "send valid UTF-8 text: \\u escapes that pair up, no NUL")
    return value


def _article(kind: str) -> str:
    return {"integer": "an integer", "array": "a list", "object": "an object"}.get(kind, f"a {kind}")


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _example(name: str, schema: dict[str, Any]) -> str:
    if "default" in schema:
        return f"e.g. {json.dumps({name: schema['default']})}"
    return f"send {_article(schema.get('type', 'value'))}" + (f": {schema['description']}" if "description" in schema else "")
