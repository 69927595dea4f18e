"""The service's OpenAPI 3.1 document, served at `GET /openapi.json`, generated from the table of
endpoints (`endpoint_table`): the request bodies are the schemas `request_schema` checks every
body against (generated from the option specs), so the document cannot promise what the service
refuses, nor the reverse."""

from __future__ import annotations

import re
from typing import Any, Sequence

from pcor_sql.service.endpoint_table import ERRORS, Caller, Endpoint
from pcor_sql.service.request_schema import Limits, explain_schema, identify_schema, sql_schema

#: The security scheme of each caller (the owner's token opens only the owner's listener).
SCHEMES = {Caller.ANALYST: "bearer", Caller.OWNER: "owner"}


def _errors(codes: Sequence[str]) -> dict[str, Any]:
    return {code: {"description": ERRORS[code],
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code in codes}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "responses": {"200": {"description": "the answer", "content": {"application/json": {"schema": endpoint.response}}},
                      **_errors(endpoint.errors)},
    }
    if endpoint.caller in SCHEMES:
        operation["security"] = [{SCHEMES[endpoint.caller]: []}]
    if endpoint.body:
        refs = [{"$ref": f"#/components/schemas/{name}"} for name in endpoint.body]
        schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 64}}
                  for name in re.findall(r"{(\w+)}", endpoint.path)]
    parameters += [{"name": q.name, "in": "query", "required": False, "schema": q.schema,
                    "description": q.description} for q in endpoint.query]
    if parameters:
        operation["parameters"] = parameters
    return operation


def document(limits: Limits, version: str, endpoints: Sequence[Endpoint] | None = None, *,
             title: str = "pcor-sql analyst service", extra_schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    """The OpenAPI document of `endpoints` (default: the analysts') served with `limits`."""
    if endpoints is None:
        from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS as endpoints
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    schemes = {"bearer": {"type": "http", "scheme": "bearer", "description": "an analyst's token"},
               "owner": {"type": "http", "scheme": "bearer", "description": "the owner token of the running service"}}
    used = {SCHEMES[e.caller] for e in endpoints if e.caller in SCHEMES}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version,
                 "description": "Private outlier explanations and anomaly answers for analysts who hold a token, "
                                "never the data (DESIGN.md §6, §8). Every answer is charged before any row is read."},
        "components": {
            "securitySchemes": {name: scheme for name, scheme in schemes.items() if name in used},
            "schemas": {"Error": {"type": "object", "required": ["error", "fix"],
                                  "properties": {"error": {"type": "string"}, "fix": {"type": "string"}}},
                        "ExplainRequest": explain_schema(limits), "IdentifyRequest": identify_schema(limits),
                        "IdentifyKeysRequest": identify_schema(limits, by_key=True), "SqlRequest": sql_schema(limits),
                        **(extra_schemas or {})},
        },
        "paths": paths,
    }
