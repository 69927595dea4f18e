"""Fuzz the service's OpenAPI document with schemathesis (DESIGN.md §5 "Errors"), against the real
app on a real uvicorn on 127.0.0.1, bounded in count and time: bodies that fit the schemas
(positive) and bodies that do not (negative), on every operation of the document the service
serves, with a valid analyst token.

For every response: no 5xx; no traceback (or Python frame) in the body; an error body is
exactly `{error, fix}`; and a 4xx raised before the reservation (every 4xx but 422, the one
generic failure after it) leaves the ledger as it was — history rows, every unit's spent ε,
every analyst's usage.

(The cases are drawn through `APIOperation.as_strategy` under hypothesis's own `@given`:
schemathesis's pytest loader does not run on pytest 9.)"""

from __future__ import annotations

import json
import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode

from tests.client.served_dataset import ABSENT, OUTLIERS, served_dataset

#: The operations schemathesis finds in the document (GET /openapi.json, with nothing to send and
#: no token, is not among them: tests/service/test_service_http.py reads it).
OPERATIONS = [("GET", "/v1/datasets"), ("POST", "/v1/explain"), ("POST", "/v1/identify"), ("POST", "/v1/sql"),
              ("POST", "/v1/cost"), ("GET", "/v1/me"), ("GET", "/v1/history"), ("GET", "/v1/releasable-keys"), ("GET", "/healthz")]
#: Examples per operation and mode (14 runs): 280 requests, ~30 s here under load 5.
EXAMPLES = 20
#: Past this many seconds since the first case, no further schemathesis request is sent (a loaded machine).
BUDGET_S = 35.0
#: Near-valid bodies per endpoint (4 runs): 100 requests, some of them answered.
NEAR_EXAMPLES = 25
_clock: list[float] = []
pytestmark = pytest.mark.slow  # ~30-55 s on this loaded 2-core machine


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("fuzz") / "staff.duckdb", max_keys=10, max_body=16384) as s:
        yield s


@pytest.fixture(scope="module")
def document(served):
    return schemathesis.openapi.from_url(served.url + "/openapi.json")


def test_the_fuzz_covers_every_operation_of_the_document(document):
    served_operations = {(r.ok().method.upper(), r.ok().path) for r in document.get_all_operations()}
    assert served_operations == set(OPERATIONS)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_5xx_no_traceback_and_no_charge_for_a_refusal(served, document, method, path, mode):
    if path == "/healthz" and mode is GenerationMode.NEGATIVE:
        pytest.skip("GET /healthz takes nothing: there is no input to get wrong")
    operation = document[path][method]
    headers = {"Authorization": f"Bearer {served.tokens['alice']}"}
    sent: list[int] = []

    @given(case=operation.as_strategy(generation_mode=mode), registered=st.booleans())
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def one(case, registered):
        if registered and isinstance(case.body, dict) and "dataset" in case.body:
            case.body["dataset"] = "staff"  # past the dataset check, into the releasable keys, ε and options
        if not _clock:
            _clock.append(time.monotonic())
        if time.monotonic() - _clock[0] > BUDGET_S:
            return
        before = served.state()
        response = case.call(base_url=served.url, headers=headers, timeout=60)
        sent.append(response.status_code)
        status, text = response.status_code, response.text
        where = (method, path, str(mode), case.body, case.query, status, text)
        assert status < 500, where
        assert "Traceback" not in text and 'File "' not in text, where
        if status >= 400:
            assert set(response.json()) == {"error", "fix"}, where
        if 400 <= status < 500 and status != 422:
            assert served.state() == before, where

    one()
    assert sent or time.monotonic() - _clock[0] > BUDGET_S


# ---- near-valid bodies: past the schema, into the trust model's checks and the reservation ----
#
# Schemathesis's bodies almost never name a registered dataset with valid options, so they stop
# at the schema check (400). These are drawn from the registered dataset's own vocabulary with
# a few wrong parts (a key outside the releasable set, ε below the minimum, an owner's option, a
# quota run out), so they reach 403, 429, 200 and 422 too; the same invariants hold, and an
# answer or a failure after the reservation charges exactly one history row per key.

# Issue 26 "Bad input": lone surrogates and NULs in text, huge integers, floats for integers,
# strings for integer keys (and integers for text keys) — all refused before the reservation.
ODD_TEXT = st.sampled_from(["\udfff", "a\ud800", "a\x00b", "\U0001f600"])
KEYS = st.one_of(st.sampled_from([*OUTLIERS, ABSENT]), st.integers(-5, 200), st.sampled_from(["7", "a-7", ""]),
                 ODD_TEXT, st.integers(2**62, 2**70), st.sampled_from([7.0, 1e300]))
HUGE = st.one_of(st.integers(0, 60), st.integers(2**40, 2**66), st.sampled_from([1e308, 2.5]))
EPSILON = st.one_of(st.sampled_from([0.05, 0.1, 0.5]), st.sampled_from([1e-300, 0.009, 0.0]),
                    st.floats(1e-4, 10.0))
EXPLAIN = st.fixed_dictionaries(
    {"dataset": st.sampled_from(["staff", "staff", "tagged"]), "keys": st.lists(KEYS, min_size=1, max_size=4),
     "epsilon": EPSILON},
    optional={"verifier": st.sampled_from(["grubbs", "zscore", "lof(k=3)", "lof(k=0)", "spy"]),
              "search": st.sampled_from(["bfs", "explore", "nope", "uniform", "random-walk"]), "samples": HUGE,
              "descents": HUGE, "max_draws": HUGE, "max_checks": HUGE,
              "verifier_options": st.one_of(st.just({"k": 3}), st.dictionaries(ODD_TEXT, st.just(1), max_size=1)),
              "by": st.sampled_from(["dept", "dept,year", ["year"], "salary"]),
              "start": st.sampled_from(["dept IN ('a')", "dept IN ('z')", "1; DROP TABLE staff"]),
              "seed": st.just(1), "owner_view": st.just(True)})
IDENTIFY = st.fixed_dictionaries(
    {"dataset": st.sampled_from(["staff", "tagged"]),
     "value": st.one_of(st.fixed_dictionaries({"pay": st.floats(-1e6, 1e6)}), st.just({"salary": 1.0})),
     "beta": st.one_of(st.sampled_from([1, 2, 5]), st.sampled_from([2**1000, 1e308])),
     "radius": st.sampled_from([0.5, 5.0, 100.0, 1e308]), "epsilon": EPSILON},
    optional={"privacy": st.sampled_from(["sp", "dp", "xx"]), "k": st.one_of(st.integers(0, 4), HUGE)})

IDENTIFY_KEYS = st.fixed_dictionaries(
    {"dataset": st.sampled_from(["staff", "tagged"]), "keys": st.lists(KEYS, min_size=1, max_size=3),
     "beta": st.sampled_from([1, 2, 5]), "radius": st.sampled_from([0.5, 5.0]), "epsilon": EPSILON},
    optional={"privacy": st.sampled_from(["sp", "dp", "xx"]), "seed": st.just(1)})


@st.composite
def statements(draw):
    """A statement from the dataset's vocabulary, a few parts wrong (a key outside the releasable
    set, ε below the minimum, an owner's option, not an analyst's statement at all); `_keys`: how
    many history rows it charges if it reaches the reservation (popped before sending)."""
    keys = draw(st.lists(st.sampled_from([*OUTLIERS, ABSENT, 500, -1]), min_size=1, max_size=3, unique=True))
    epsilon = draw(st.sampled_from([0.05, 0.1, 1e-300]))
    extra = draw(st.sampled_from(["", ", seed = 1", ", samples = 0", ", owner_view = true"]))
    where = f"id IN ({', '.join(map(str, keys))})"
    text = draw(st.sampled_from([
        f"EXPLAIN OUTLIER SELECT pay FROM staff WHERE {where} USING grubbs WITH (epsilon = {epsilon}{extra})",
        f"IDENTIFY ANOMALY SELECT pay FROM staff WHERE {where} WITH (beta = 2, radius = 5, epsilon = {epsilon}{extra})",
        f"IDENTIFY ANOMALY VALUE (pay = {keys[0]}) FROM staff WITH (beta = 2, radius = 5, epsilon = {epsilon}{extra})",
        "SELECT * FROM staff", "EXPLAIN OUTLIER SELECT pay FROM nowhere WHERE id = 7", "EXPLAIN OUTLIER SELEC",
        "\udfff", "",
    ]))
    return {"sql": text, "_keys": 1 if " VALUE " in text else len(keys)}


@pytest.mark.parametrize(("path", "bodies"), [("/v1/explain", EXPLAIN), ("/v1/identify", st.one_of(IDENTIFY, IDENTIFY_KEYS)),
                                              ("/v1/sql", statements()), ("/v1/cost", st.one_of(EXPLAIN, IDENTIFY))],
                         ids=["explain", "identify", "sql", "cost"])
def test_near_valid_bodies_refused_uncharged_or_charged_per_key(served, path, bodies):
    import httpx

    statuses: list[int] = []
    with httpx.Client(base_url=served.url, timeout=60,
                      headers={"Authorization": f"Bearer {served.tokens['bob']}"}) as client:

        @given(body=bodies)
        @settings(max_examples=NEAR_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def one(body):
            charged = body.pop("_keys", None) or len({(type(k), k) for k in body.get("keys", [None])})
            before = served.state()
            response = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
            status, text = response.status_code, response.text
            statuses.append(status)
            assert status < 500 and "Traceback" not in text and 'File "' not in text, (body, status, text)
            after = served.state()
            if status == 200 and path == "/v1/cost" or 400 <= status < 500 and status != 422:
                assert after == before, (body, status, text)
            else:
                assert len(after[0]) - len(before[0]) == charged, (body, status, text)
            # The history says what the analyst was told (DESIGN.md §6 "The history is the truth"): answered for a 200, failed for a 422.
            told = {200: "answered", 422: "failed"}.get(status)
            if told is not None and path != "/v1/cost":
                assert {r.outcome for r in after[0][len(before[0]):]} == {told}, (body, status, text)

        one()
    assert set(statuses) - {400}, statuses  # the draws reach past the schema check
