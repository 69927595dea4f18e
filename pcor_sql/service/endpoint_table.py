"""Every endpoint of the service, declared once (DESIGN.md §8): method, path, handler, who may
call it, query parameters, request and response schemas, errors. The routes (`http_app`) and
the OpenAPI document (`openapi_document`) are both generated from this table, so a path cannot
be served without being documented, nor documented without being served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcor_sql.core.option_spec import StrEnum


class Caller(StrEnum):
    """Who may call an endpoint: anyone (the document, the health check), an analyst with a
    bearer token, or the owner (only on the owner's loopback listener)."""

    PUBLIC = "public"
    ANALYST = "analyst"
    OWNER = "owner"


@dataclass(frozen=True)
class Query:
    """A query parameter: its name, JSON Schema (integer or string), and meaning."""

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class Endpoint:
    """One endpoint. `handler` names the service's method that answers it; `body` names a
    component schema (or several: any of them) of its JSON body; `response` is the schema of its
    200; `errors` the status codes it may refuse with (each described in `ERRORS`)."""

    method: str
    path: str
    handler: str
    caller: Caller
    summary: str
    response: dict[str, Any]
    body: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    query: tuple[Query, ...] = ()

    @property
    def query_names(self) -> frozenset[str]:
        return frozenset(q.name for q in self.query)


#: What each refusal status means (every error body is `{error, fix}`; only 422 was charged).
ERRORS = {
    "400": "bad input, refused before anything was read or charged (a wrong type, a value out of its declared "
           "bounds, text that is not valid Unicode, a key of the wrong JSON type, a token in the query string, "
           "two Authorization headers)",
    "401": "missing, malformed, unknown or revoked token (always the same body)",
    "403": "refused by the trust model before the reservation (an owner's option, a key outside the releasable "
           "set, ε below the minimum, a dataset this analyst may not use, a ledger that cannot take charges now); "
           "nothing charged",
    "404": "no such path (paths are exact: no trailing slash, no redirect)",
    "405": "the path exists for other methods (the Allow header lists them)",
    "413": "the body is too large; nothing charged",
    "415": "the body is not application/json; nothing charged",
    "422": "the request failed after its cost was reserved: charged, and the same message whatever the data holds "
           "(a search that reached the service's work cap ends so too)",
    "429": "the charge would pass the analyst's quota or a limit on the data (one message for both, naming only "
           "the request's cost); nothing charged",
    "503": "the service is stopping: the request was interrupted (the history says so); an owner command is not "
           "run (run it again: it opens the file once the service lets go of it)",
}

_NUMBER_OR_NULL = {"type": ["number", "null"]}
EXPLANATION = {
    "type": "object",
    "description": "one released explanation: the key given, the context, its predicate and SQL, the privacy parameters",
    "properties": {
        "summary": {"type": "string"}, "privacy_summary": {"type": "string"}, "dataset": {"type": "string"},
        "key": {"type": ["integer", "number", "string"]}, "metric": {"type": "string"},
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
#: The most history rows one page holds.
MAX_PAGE = 1000
HISTORY_QUERY = (
    Query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 100},
          f"the most rows in this page (1 to {MAX_PAGE}; the most recent ones)"),
    Query("before", {"type": "string", "maxLength": 64},
          "a release_id from an earlier page: the rows asked before it (page backwards)"),
)

RELEASABLE_QUERY = (
    Query("dataset", {"type": "string", "maxLength": 128}, "the registered dataset (required)"),
    Query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 100},
          f"the most keys in this page (1 to {MAX_PAGE})"),
    Query("offset", {"type": "integer", "minimum": 0, "maximum": 10**12, "default": 0},
          "how many keys to skip, in the frozen order (page on with offset + limit)"),
)
RELEASABLE = {
    "type": "object",
    "description": "one page of the keys the owner declared releasable: public by that declaration",
    "properties": {
        "dataset": {"type": "string"},
        "total": {"type": ["integer", "null"], "description": "how many keys are releasable (null: none declared)"},
        "offset": {"type": "integer"},
        "keys": {"type": "array", "items": {"type": ["integer", "number", "string"]},
                 "description": "as the key column's JSON kind, to send back as they are"},
    },
}

_POST = ("400", "401", "403", "413", "415", "422", "429", "503")
ANALYST_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1/datasets", "datasets", Caller.ANALYST, "The registered datasets this analyst may use",
             {"type": "object", "properties": {"datasets": {"type": "array", "items": DATASET}}}, errors=("400", "401")),
    Endpoint("GET", "/v1/releasable-keys", "releasable_keys", Caller.ANALYST,
             "The keys of a dataset that may be asked about by key (paged: dataset, limit, offset)", RELEASABLE,
             errors=("400", "401", "403"), query=RELEASABLE_QUERY),
    Endpoint("POST", "/v1/explain", "explain", Caller.ANALYST,
             "Private explanations of records (EXPLAIN OUTLIER), ε each; one result per key, in the order given",
             {"type": "object", "properties": {"results": {"type": "array", "items": EXPLANATION}}},
             body=("ExplainRequest",), errors=_POST),
    Endpoint("POST", "/v1/identify", "identify", Caller.ANALYST,
             "A private anomaly answer about a point of the metric space (IDENTIFY ANOMALY VALUE)",
             {"type": "object", "properties": {"results": {"type": "array", "items": ANSWER}}},
             body=("IdentifyRequest",), errors=_POST),
    Endpoint("POST", "/v1/cost", "cost", Caller.ANALYST,
             "What an explain or identify body would charge (data independent, nothing charged)", COST,
             body=("ExplainRequest", "IdentifyRequest"), errors=("400", "401", "403", "413", "415")),
    Endpoint("GET", "/v1/me", "me", Caller.ANALYST, "This analyst: quotas and ε spent per notion",
             {"type": "object"}, errors=("400", "401")),
    Endpoint("GET", "/v1/history", "history", Caller.ANALYST,
             "This analyst's own requests, oldest first within the page (paged: limit, before)",
             {"type": "object", "properties": {"history": {"type": "array", "items": {"type": "object"}}}},
             errors=("400", "401"), query=HISTORY_QUERY),
    Endpoint("GET", "/healthz", "health", Caller.PUBLIC, "Whether the service is up (no token needed)",
             {"type": "object", "properties": {"status": {"type": "string"}}}, errors=("400",)),
    Endpoint("GET", "/openapi.json", "openapi", Caller.PUBLIC, "This document", {"type": "object"}, errors=("400",)),
)


# ---- the owner's listener (DESIGN.md §9: loopback only, the owner token only) -------------------

_NAME = {"type": "string", "maxLength": 64, "description": "the analyst's name"}
_NOTION = {"type": "string", "enum": ["ocdp", "dp", "sp"]}
OWNER_BODIES: dict[str, dict[str, Any]] = {
    "AnalystAdd": {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
        "name": _NAME, "quota": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
        "notion": _NOTION, "datasets": {"type": "array", "items": {"type": "string", "maxLength": 128}, "maxItems": 64}}},
    "Quota": {"type": "object", "additionalProperties": False, "required": ["epsilon"], "properties": {
        "epsilon": {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1e6}, {"type": "null"}]},
        "notion": _NOTION, "dataset": {"type": "string", "maxLength": 128}}},
    "Command": {"type": "object", "additionalProperties": False, "required": ["argv"], "properties": {
        "argv": {"type": "array", "minItems": 2, "maxItems": 64, "items": {"type": "string", "maxLength": 4096},
                 "description": "an owner command's arguments after `pcor-sql`, e.g. [\"analyst\", \"list\", "
                                "\"--db\", \"/abs/file.duckdb\"]"}}},
}
_TOKEN = {"type": "object", "properties": {"name": {"type": "string"}, "token": {"type": "string"}}}
_OWNER_ERRORS = ("400", "401", "404")
_PAGE = (Query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "rows per page (1 to 500)"),
         Query("offset", {"type": "integer", "minimum": 0, "maximum": 10**12, "default": 0}, "rows to skip"))
OWNER_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1/owner/analysts", "analysts", Caller.OWNER, "Every analyst: quotas, spent, requests by outcome",
             {"type": "object"}, errors=_OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts", "add_analyst", Caller.OWNER, "Name an analyst; their token, shown once",
             _TOKEN, body=("AnalystAdd",), errors=(*_OWNER_ERRORS, "413", "415")),
    Endpoint("POST", "/v1/owner/analysts/{name}/revoke", "revoke", Caller.OWNER,
             "Stop an analyst's token at once (requests already reserved finish and are recorded)", {"type": "object"},
             errors=_OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts/{name}/rotate", "rotate", Caller.OWNER,
             "A new token for an analyst, shown once; the old one stops at once; quotas and history stay", _TOKEN,
             errors=_OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/analysts/{name}/quota", "quota", Caller.OWNER,
             "Set (a number) or clear (null) an analyst's quota", {"type": "object"}, body=("Quota",),
             errors=(*_OWNER_ERRORS, "413", "415")),
    Endpoint("GET", "/v1/owner/datasets", "datasets", Caller.OWNER, "The registry: datasets, releasable keys, limits",
             {"type": "object"}, errors=_OWNER_ERRORS),
    Endpoint("GET", "/v1/owner/budget", "budget", Caller.OWNER, "Per unit and notion: spent, limit, releases",
             {"type": "object"}, errors=_OWNER_ERRORS),
    Endpoint("GET", "/v1/owner/history", "history", Caller.OWNER,
             "History rows, newest first: what was asked and its outcome (filtered, paged)", {"type": "object"},
             errors=_OWNER_ERRORS, query=(
                 Query("analyst", {"type": "string", "maxLength": 64}, "only this analyst's rows"),
                 Query("dataset", {"type": "string", "maxLength": 128}, "only this dataset's rows"),
                 Query("outcome", {"type": "string", "enum": ["answered", "failed", "interrupted", "running",
                                                              "charged"]}, "only rows with this outcome"),
                 *_PAGE)),
    Endpoint("GET", "/v1/owner/spending", "spending", Caller.OWNER, "ε spent over time, per unit or per analyst",
             {"type": "object"}, errors=_OWNER_ERRORS,
             query=(Query("by", {"type": "string", "enum": ["unit", "analyst"], "default": "unit"}, "the grouping"),)),
    Endpoint("GET", "/v1/owner/audit", "audit", Caller.OWNER, "The latest audit lines (one per request, never a token)",
             {"type": "object"}, errors=_OWNER_ERRORS,
             query=(Query("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "lines"),)),
    Endpoint("GET", "/v1/owner/workers", "workers", Caller.OWNER,
             "The workers now: each one's search process (pid, alive, forks, records searched) and the requests "
             "running and waiting", {"type": "object"}, errors=_OWNER_ERRORS),
    Endpoint("POST", "/v1/owner/command", "command", Caller.OWNER,
             "Run an owner command of the CLI on the served file (what `pcor-sql analyst|dataset|budget ... --db FILE`, "
             "`explain-outlier`, `identify-anomaly` and `coe` send while the file is served): its exit code, stdout, "
             "stderr and the pictures it drew (base64, for the caller to write at their path)",
             {"type": "object", "properties": {
                 "exit_code": {"type": "integer"}, "stdout": {"type": "string"}, "stderr": {"type": "string"},
                 "files": {"type": "array", "items": {"type": "object", "properties": {
                     "path": {"type": "string"}, "data": {"type": "string", "contentEncoding": "base64"}}}}}},
             body=("Command",), errors=(*_OWNER_ERRORS, "413", "415", "503")),
    Endpoint("GET", "/healthz", "health", Caller.PUBLIC, "Whether the service is up (no token needed)",
             {"type": "object", "properties": {"status": {"type": "string"}}}, errors=("400",)),
    Endpoint("GET", "/v1/owner/openapi.json", "openapi", Caller.PUBLIC, "This document", {"type": "object"},
             errors=("400",)),
)
