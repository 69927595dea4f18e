"""The analysts' endpoints (DESIGN.md §8), each a handler over the `Service` and its row in the
table: method, path, the handler itself, who may call it, the schemas. The routes (`http_app`)
and the OpenAPI document (`openapi_document`) are generated from `ANALYST_ENDPOINTS`, so a path
cannot be served without being documented, nor documented without being served; the schemas of
the results are derived from the result types (`result_schemas`)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.requests import Request

from pcor_sql import analyst_account
from pcor_sql.jsonable import jsonable
from pcor_sql.results import AnalystAnswer
from pcor_sql.session import Session
from pcor_sql.service.analyst_identity import Identity
from pcor_sql.service.analyst_service import Service
from pcor_sql.analyst_statements import statement_dataset
from pcor_sql.service.endpoint_table import (
    DATASET, HISTORY_QUERY, RELEASABLE, RELEASABLE_QUERY, Caller, Endpoint, Query,
)
from pcor_sql.service.http_plumbing import health, openapi
from pcor_sql.service.request_schema import BadRequest, check
from pcor_sql.service.result_schemas import ANSWER, COST, EXPLANATION



async def datasets(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    found = await anyio.to_thread.run_sync(service.visible, identity)
    return {"datasets": analyst_account.dataset_rows(found)}


async def explain(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    body = await service.body(request)
    check(body, service.explain_schema, "the body")
    dataset, keys = body.pop("dataset"), body.pop("keys")
    request.state.asked = {"dataset": dataset, "epsilon": body.get("epsilon"), "keys": len(keys)}
    results = await service.answer(identity, "explain_outliers", dataset, (dataset, keys), body)
    return {"results": [jsonable(r.as_dict()) for r in results]}


async def identify(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    body = await service.body(request)
    if "keys" in body:  # by key: among the releasable keys, as in-process (DESIGN.md §6 "What an analyst may ask about")
        check(body, service.identify_keys_schema, "the body")
        dataset, keys = body.pop("dataset"), body.pop("keys")
        request.state.asked = {"dataset": dataset, "epsilon": body.get("epsilon"), "keys": len(keys)}
        answers = await service.answer(identity, "identify_anomalies", dataset, (dataset, keys), body)
        return {"results": [jsonable(a.as_dict()) for a in answers]}
    check(body, service.identify_schema, "the body")
    dataset, value = body.pop("dataset"), body.pop("value")
    request.state.asked = {"dataset": dataset, "epsilon": body.get("epsilon"), "keys": 1}
    answer = await service.answer(identity, "identify_value", dataset, (dataset, value), body)
    return {"results": [_point_answer(answer)]}


async def sql(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    """One statement, through the very path of `/v1/explain` and `/v1/identify` (`Service.answer`:
    admitted first when it would wait, then charged before any row is read); the dataset it
    names is read from it on the cursor that admits or runs it (parsing reads no row)."""
    body = await service.body(request)
    check(body, service.sql_schema, "the body")
    text = body["sql"]
    asked = request.state.asked = {"dataset": None, "epsilon": None, "keys": None}

    def dataset(session: Session) -> str:
        asked["dataset"] = statement_dataset(session, text)
        return asked["dataset"]

    results = await service.answer(identity, "sql", dataset, (text,), {})
    asked["keys"] = len(results)
    return {"results": [_point_answer(r) if type(r.key) is dict else jsonable(r.as_dict()) for r in results]}


def _point_answer(answer: AnalystAnswer) -> dict[str, Any]:
    """An answer about a point, as `/v1/identify` names it: the point is `value` (and `key`, as
    in-process, where `AnalystAnswer.key` is the point)."""
    shown = jsonable(answer.as_dict())
    shown["value"] = shown["key"]
    return shown


#: `POST /v1/cost?method=...`: the request it prices → the body schema (by its name on `Service`)
#: and the body field holding the target.
_PRICED = {"explain_outliers": ("explain_schema", "keys"), "identify_anomalies": ("identify_keys_schema", "keys"),
           "identify_value": ("identify_schema", "value")}
COST_QUERY = (Query("method", {"type": "string", "enum": sorted(_PRICED)},
                    "the request priced (default: explain_outliers for a body with keys, identify_value for one "
                    "with value)"),)


async def cost(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    body = await service.body(request)
    method = params.get("method")
    if method is None:
        if ("keys" in body) == ("value" in body):
            raise BadRequest("a cost body is an explain body (with keys) or an identify body (with value)",
                             "send the body you would send to /v1/explain or /v1/identify, or say ?method=")
        method = "explain_outliers" if "keys" in body else "identify_value"
    schema, field = _PRICED[method]
    check(body, getattr(service, schema), "the body")
    dataset, target = body.pop("dataset"), body.pop(field)
    found = await service.run(identity, dataset, lambda a: a.cost(method, dataset, target, **body), pool=service.admission)
    return {"dataset": dataset, **found.as_dict()}


async def me(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    return await anyio.to_thread.run_sync(lambda: analyst_account.me(
        service.ledger, identity.name, identity.datasets, min_epsilon=service.min_epsilon,
        max_keys=service.limits.max_keys, max_work=service.max_work))


async def releasable_keys(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    if "dataset" not in params:
        raise BadRequest("no dataset given", "e.g. /v1/releasable-keys?dataset=salaries")
    dataset, limit, offset = params["dataset"], params.get("limit", 100), params.get("offset", 0)
    return await service.run(identity, dataset, lambda a: a.releasable_keys(dataset, limit=limit, offset=offset),
                             pool=service.admission)


async def history(service: Service, request: Request, identity: Identity, params: dict[str, Any]) -> Any:
    limit, before = params.get("limit", analyst_account.HISTORY_PAGE), params.get("before")
    rows = await anyio.to_thread.run_sync(analyst_account.history, service.ledger, identity.name, limit, before)
    return {"history": rows}


_POST = ("400", "401", "403", "413", "415", "422", "429", "503")
#: Every endpoint of the analysts' listener: a row holds its handler (FastAPI's habit) and its schemas.
ANALYST_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1/datasets", datasets, Caller.ANALYST, "The registered datasets this analyst may use",
             {"type": "object", "properties": {"datasets": {"type": "array", "items": DATASET}}}, errors=("400", "401")),
    Endpoint("GET", "/v1/releasable-keys", releasable_keys, Caller.ANALYST,
             "The keys of a dataset that may be asked about by key (paged: dataset, limit, offset)", RELEASABLE,
             errors=("400", "401", "403"), query=RELEASABLE_QUERY),
    Endpoint("POST", "/v1/explain", explain, Caller.ANALYST,
             "Private explanations of records (EXPLAIN OUTLIER), ε each; one result per key, in the order given",
             {"type": "object", "properties": {"results": {"type": "array", "items": EXPLANATION}}},
             body=("ExplainRequest",), errors=_POST),
    Endpoint("POST", "/v1/identify", identify, Caller.ANALYST,
             "Private anomaly answers about a point of the metric space (IDENTIFY ANOMALY VALUE), or about records "
             "by key (among the releasable keys), ε each; one result per key, in the order given",
             {"type": "object", "properties": {"results": {"type": "array", "items": ANSWER}}},
             body=("IdentifyRequest", "IdentifyKeysRequest"), errors=_POST),
    Endpoint("POST", "/v1/sql", sql, Caller.ANALYST,
             "One EXPLAIN OUTLIER or IDENTIFY ANOMALY statement, run as the request it spells (ε each key); one "
             "result per key, in the order given",
             {"type": "object", "properties": {"results": {"type": "array", "items": {"anyOf": [EXPLANATION, ANSWER]}}}},
             body=("SqlRequest",), errors=_POST),
    Endpoint("POST", "/v1/cost", cost, Caller.ANALYST,
             "What an explain or identify body would charge (data independent, nothing charged)", COST,
             body=("ExplainRequest", "IdentifyRequest", "IdentifyKeysRequest"), errors=("400", "401", "403", "413", "415"),
             query=COST_QUERY),
    Endpoint("GET", "/v1/me", me, Caller.ANALYST, "This analyst: quotas and ε spent per notion",
             {"type": "object"}, errors=("400", "401")),
    Endpoint("GET", "/v1/history", history, Caller.ANALYST,
             "This analyst's own requests, oldest first within the page (paged: limit, before)",
             {"type": "object", "properties": {"history": {"type": "array", "items": {"type": "object"}}}},
             errors=("400", "401"), query=HISTORY_QUERY),
    Endpoint("GET", "/healthz", health, Caller.PUBLIC, "Whether the service is up (no token needed)",
             {"type": "object", "properties": {"status": {"type": "string"}}}, errors=("400",)),
    Endpoint("GET", "/openapi.json", openapi, Caller.PUBLIC, "This document", {"type": "object"}, errors=("400",)),
)
