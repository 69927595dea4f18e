"""The response schemas are derived from the result types (DESIGN.md §8): every key an
analyst's result carries is in its schema, with the JSON type its annotation says, and each
row of the table holds its handler object, not a name."""

from __future__ import annotations

import dataclasses

import jsonschema

from pcor_sql.analyst_keys import RequestCost
from pcor_sql.results import AnalystAnswer, AnalystExplanation
from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS
from pcor_sql.service.owner_app import OWNER_ENDPOINTS
from pcor_sql.service.result_schemas import ANSWER, COST, EXPLANATION, result_schema


def test_the_schemas_follow_the_result_types():
    released = AnalystExplanation("staff", 42, "pay", {"dept": ["A"]}, "dept IN ('A')", "SELECT 1", 0.2, 0.01,
                                  "tight", "direct", None, "lof(k=20)", "population")
    shown = released.as_dict()
    assert set(EXPLANATION["properties"]) == set(shown)
    jsonschema.validate(shown, EXPLANATION)
    by_key = AnalystAnswer("staff", 42, ("x",), True, 0.1, "sp", 2, 2.0, 1.0, "l2").as_dict()
    jsonschema.validate(by_key, ANSWER)
    answer = AnalystAnswer("staff", {"x": 1.0}, ("x",), True, 0.1, "sp", 2, 2.0, 1.0, "l2").as_dict()
    answer["value"] = answer["key"]  # an answer about a point names it both ways (`/v1/identify`)
    assert set(ANSWER["properties"]) == set(answer) == set(by_key) | {"value"}
    jsonschema.validate(answer, ANSWER)
    cost = {"dataset": "staff", **RequestCost("ocdp", 0.2, None, 3, 0.6).as_dict()}
    assert set(COST["properties"]) == set(cost)
    jsonschema.validate(cost, COST)


def test_a_field_added_to_a_result_is_in_its_schema_at_once():
    @dataclasses.dataclass(frozen=True)
    class Grown(RequestCost):
        note: str | None = None

    assert result_schema(Grown, "")["properties"]["note"] == {"type": ["string", "null"]}


def test_each_row_holds_its_handler():
    for endpoint in (*ANALYST_ENDPOINTS, *OWNER_ENDPOINTS):
        assert callable(endpoint.handler), endpoint.path
