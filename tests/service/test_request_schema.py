"""The service's request schemas come from the option specs, and one schema both documents and
checks a body (exact JSON types, bounds)."""

from __future__ import annotations

import pytest

from pcor_sql.core.option_spec import Kind
from pcor_sql.request_specs import Job, analyst_options, owner_options, specs_for
from pcor_sql.service.openapi_document import document
from pcor_sql.service.request_schema import BadRequest, Limits, check, explain_schema, identify_schema, parse_body

LIMITS = Limits(max_keys=5, max_text=50, max_body=2000)


def test_the_fields_are_the_analyst_options_and_the_handle_words():
    explain, identify = explain_schema(LIMITS), identify_schema(LIMITS)
    assert set(explain["properties"]) == analyst_options(Job.EXPLAIN) | {"dataset", "keys", "metric", "verifier_options"}
    assert set(identify["properties"]) == analyst_options(Job.IDENTIFY) | {"dataset", "value"}
    # The owner's options are no field at all ("dataset" there is the owner's ledger label, here the registered name).
    assert not set(explain["properties"]) & (owner_options(Job.EXPLAIN) - {"dataset"})
    assert {"seed", "owner_view", "domains"} <= owner_options(Job.EXPLAIN)
    assert explain["additionalProperties"] is False and identify["additionalProperties"] is False
    doc = document(LIMITS, "0")
    assert doc["components"]["schemas"]["ExplainRequest"] == explain
    assert doc["components"]["schemas"]["IdentifyRequest"] == identify


@pytest.mark.parametrize("job", list(Job))
def test_each_numeric_option_is_checked_at_its_bound_by_exact_type(job):
    schema = explain_schema(LIMITS) if job is Job.EXPLAIN else identify_schema(LIMITS)
    for name in analyst_options(job):
        spec = specs_for(job)[name]
        field = schema["properties"][name]
        if spec.kind in (Kind.NUMBER, Kind.INTEGER):
            check(1 if spec.kind is Kind.INTEGER else 1.5, field, name)
            for bad in (True, "1", None, [1]):
                with pytest.raises(BadRequest):
                    check(bad, field, name)
            if spec.kind is Kind.INTEGER:
                with pytest.raises(BadRequest, match="an integer"):
                    check(1.0, field, name)
            if spec.minimum is not None:
                low = int(spec.minimum) if spec.kind is Kind.INTEGER else spec.minimum
                if spec.minimum_inclusive:
                    check(low, field, name)
                    with pytest.raises(BadRequest):
                        check(low - 1, field, name)
                else:
                    with pytest.raises(BadRequest):
                        check(low, field, name)
        elif spec.kind is Kind.STRING and spec.choices:
            check(str(spec.choices[0]), field, name)
            with pytest.raises(BadRequest, match="unknown"):
                check("nope", field, name)


@pytest.mark.parametrize("body, problem", [
    ({"dataset": "s", "keys": [1] * 6, "epsilon": 0.1}, "1 to 5 items"),
    ({"dataset": "s", "keys": [], "epsilon": 0.1}, "1 to 5 items"),
    ({"dataset": "s", "keys": ["x" * 51], "epsilon": 0.1}, "wrong type"),
    ({"dataset": "s", "keys": [2**63], "epsilon": 0.1}, "wrong type"),
    ({"dataset": "s", "keys": [1]}, "'epsilon' is missing"),
    ({"dataset": "s", "keys": [1], "epsilon": 0.1, "by": []}, "wrong type"),
    ({"dataset": "s", "keys": [1], "epsilon": 0.1, "verifier_options": {"k": [1]}}, "wrong type"),
    ({"dataset": "s", "keys": [1], "epsilon": 0.1, "start": "a\x00"}, "NUL"),
])
def test_bounds_and_types(body, problem):
    with pytest.raises(BadRequest, match=problem):
        check(body, explain_schema(LIMITS), "the body")


def test_parse_body_refuses_what_json_loads_would_let_through():
    assert parse_body(b'{"a": 1.5, "b": [1, "x"]}', LIMITS) == {"a": 1.5, "b": [1, "x"]}
    for raw, status in [(b'{"a": NaN}', 400), (b'{"a": -Infinity}', 400), (b'{"a": 1e999}', 400),
                        (b'{"a": 1, "a": 2}', 400), (b"[1]", 400), (b"x" * 2001, 413), (b"\xff", 400),
                        (b"[" * 1500 + b"]" * 1500, 413), (b"[" * 900 + b"]" * 900, 400)]:
        with pytest.raises(BadRequest) as err:
            parse_body(raw, LIMITS)
        assert err.value.status == status, raw[:20]
