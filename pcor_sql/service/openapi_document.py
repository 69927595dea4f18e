"""The service's OpenAPI 3.1 document, served at `GET /openapi.json`: the request bodies are the
schemas `request_schema` checks every body against (generated from the option specs), so the
document cannot promise what the service refuses, nor the reverse."""

from __future__ import annotations

from typing import Any

from pcor_sql.service.request_schema import Limits, explain_schema, identify_schema

#: What each refusal status means (every error body is `{error, fix}`; only 422 was charged).
ERRORS = {
    "400": "bad input, refused before anything was read or charged",
    "401": "missing, malformed, unknown or revoked token (always the same body)",
    "403": "refused by the trust model before the reservation (an owner's option, a key outside the releasable "
           "set, ε below the minimum, a dataset this analyst may not use, a ledger that cannot take charges now); "
           "nothing charged",
    "413": "the body is too large; nothing charged",
    "415": "the body is not application/json; nothing charged",
    "422": "the request failed after its cost was reserved: charged, and the same message whatever the data holds",
    "429": "the charge would pass the analyst's quota or a limit on the data (one message for both, naming only "
           "the request's cost); nothing charged",
}


def _error_responses(*codes: str) -> dict[str, Any]:
    return {code: {"description": ERRORS[code],
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code in codes}


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": {"description": description, "content": {"application/json": {"schema": schema}}}}


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_NUMBER_OR_NULL = {"type": ["number", "null"]}
EXPLANATION = {
    "type": "object",
    "description": "one released explanation: the key given, the context, its predicate and SQL, the privacy parameters",
    "properties": {
        "summary": {"type": "string"}, "privacy_summary": {"type": "string"}, "dataset": {"type": "string"},
        "key": {"type": ["integer", "string"]}, "metric": {"type": "string"},
        "context": {"type": "object", "additionalProperties": {"type": "array"}},
        "predicate": {"type": "string"}, "explanation_sql": {"type": "string"},
        "epsilon": {"type": "number"}, "epsilon1": {"type": "number"}, "accounting": {"type": "string"},
        "search": {"type": "string"}, "samples": {"type": ["integer", "null"]}, "verifier": {"type": "string"},
        "utility": {"type": "string"},
    },
}
ANSWER = {
    "type": "object",
    "description": "the mechanism's randomized bit for the point, with the privacy parameters",
    "properties": {
        "summary": {"type": "string"}, "privacy_summary": {"type": "string"}, "dataset": {"type": "string"},
        "value": {"type": "object", "additionalProperties": {"type": "number"}},
        "columns": {"type": "array", "items": {"type": "string"}}, "anomaly": {"type": "boolean"},
        "epsilon": {"type": "number"}, "privacy": {"type": "string"}, "k": {"type": ["integer", "null"]},
        "beta": {"type": "number"}, "radius": {"type": "number"}, "norm": {"type": "string"},
    },
}
COST = {
    "type": "object",
    "description": "what the request would charge (nothing is charged, no row is read)",
    "properties": {"dataset": {"type": "string"}, "notion": {"type": "string", "enum": ["ocdp", "dp", "sp"]},
                   "epsilon": {"type": "number"}, "k": {"type": ["integer", "null"]}, "count": {"type": "integer"},
                   "total": {"type": "number"}},
}
DATASET = {
    "type": "object",
    "description": "a registered dataset: public by registration",
    "properties": {
        "name": {"type": "string"}, "key": {"type": "string"}, "metrics": {"type": "array", "items": {"type": "string"}},
        "attributes": {"type": "array", "items": {"type": "string"}},
        "domains": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "releasable_keys": {"type": ["integer", "null"], "description": "how many keys may be asked about"},
        "accounting": {"type": ["string", "null"]},
    },
}


def document(limits: Limits, version: str) -> dict[str, Any]:
    """The OpenAPI document of an app with `limits`."""
    explain, identify = explain_schema(limits), identify_schema(limits)
    secured = [{"bearer": []}]
    get_errors = _error_responses("401")
    post_errors = _error_responses("400", "401", "403", "413", "415", "422", "429")
    return {
        "openapi": "3.1.0",
        "info": {"title": "pcor-sql analyst service", "version": version,
                 "description": "Private outlier explanations and anomaly answers for analysts who hold a token, "
                                "never the data (DESIGN.md §6, §8). Every answer is charged before any row is read."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": {"type": "object", "required": ["error", "fix"],
                                  "properties": {"error": {"type": "string"}, "fix": {"type": "string"}}},
                        "ExplainRequest": explain, "IdentifyRequest": identify},
        },
        "paths": {
            "/v1/datasets": {"get": {
                "summary": "The registered datasets this analyst may use", "security": secured,
                "responses": {**_ok("the datasets", {"type": "object", "properties": {
                    "datasets": {"type": "array", "items": DATASET}}}), **get_errors}}},
            "/v1/explain": {"post": {
                "summary": "Private explanations of records (EXPLAIN OUTLIER), ε each", "security": secured,
                "requestBody": _json_body({"$ref": "#/components/schemas/ExplainRequest"}),
                "responses": {**_ok("one result per key, in the order given", {"type": "object", "properties": {
                    "results": {"type": "array", "items": EXPLANATION}}}), **post_errors}}},
            "/v1/identify": {"post": {
                "summary": "A private anomaly answer about a point of the metric space (IDENTIFY ANOMALY VALUE)",
                "security": secured, "requestBody": _json_body({"$ref": "#/components/schemas/IdentifyRequest"}),
                "responses": {**_ok("the answer", {"type": "object", "properties": {
                    "results": {"type": "array", "items": ANSWER}}}), **post_errors}}},
            "/v1/cost": {"post": {
                "summary": "What an explain or identify body would charge (data independent, nothing charged)",
                "security": secured,
                "requestBody": _json_body({"oneOf": [{"$ref": "#/components/schemas/ExplainRequest"},
                                                     {"$ref": "#/components/schemas/IdentifyRequest"}]}),
                "responses": {**_ok("the cost", COST), **_error_responses("400", "401", "403", "413", "415")}}},
            "/v1/me": {"get": {
                "summary": "This analyst: quotas and ε spent per notion", "security": secured,
                "responses": {**_ok("the analyst", {"type": "object"}), **get_errors}}},
            "/v1/history": {"get": {
                "summary": "This analyst's own requests, oldest first", "security": secured,
                "responses": {**_ok("the history", {"type": "object", "properties": {
                    "history": {"type": "array", "items": {"type": "object"}}}}), **get_errors}}},
            "/openapi.json": {"get": {"summary": "This document",
                                      "responses": _ok("the OpenAPI document", {"type": "object"})}},
        },
    }
