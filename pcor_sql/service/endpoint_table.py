"""What an endpoint of the service is, declared once (DESIGN.md §8): method, path, its handler
(the object itself, FastAPI's habit), who may call it, query parameters, request and response
schemas, errors — and the schemas the tables share. Each listener's table is a tuple of these
rows beside its handlers (`analyst_endpoints.ANALYST_ENDPOINTS`, `owner_app.OWNER_ENDPOINTS`,
`console_app.CONSOLE_ENDPOINTS`; all of them: `every_endpoint.every_endpoint`); the routes
and the OpenAPI documents are generated from the rows, so a path cannot be served without being
documented, nor documented without being served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from pcor_sql.analyst_account import HISTORY_PAGE, MAX_HISTORY_PAGE, RELEASE_ID_LENGTH
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
    """One endpoint. `handler` answers it: a function of the listener's service object (bound at
    routing), the request, the caller's identity (not for `PUBLIC`) and the checked query
    parameters; `body` names a component schema (or several: any of them) of its JSON body;
    `response` is the schema of its 200; `errors` the status codes it may refuse with (each
    described in `ERRORS`)."""

    method: str
    path: str
    handler: Callable[..., Awaitable[Any]]
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
    Query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY_PAGE, "default": HISTORY_PAGE},
          f"the most rows in this page (1 to {MAX_HISTORY_PAGE}; the most recent ones)"),
    Query("before", {"type": "string", "maxLength": RELEASE_ID_LENGTH},
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
TOKEN = {"type": "object", "properties": {"name": {"type": "string"}, "token": {"type": "string"}}}
OWNER_ERRORS = ("400", "401", "404")
OWNER_PAGE = (Query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "rows per page (1 to 500)"),
              Query("offset", {"type": "integer", "minimum": 0, "maximum": 10**12, "default": 0}, "rows to skip"))
