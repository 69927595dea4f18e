"""Issue 26 over real HTTP on 127.0.0.1: no analyst can stall or fool the service — every option
bounded, every request's work capped, inputs exact before the reservation, the history equal to
what the analyst was told, and exact paths with clean HTTP. Bounded in time and count."""

from __future__ import annotations

import json
import logging
import threading
import time

import httpx
import pytest

from tests.client.served_dataset import OUTLIERS, served_dataset

HEAVY = {"dataset": "staff", "epsilon": 0.01, "verifier": "grubbs", "search": "bfs", "samples": 1_000_000,
         "descents": 100_000}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("bounds") / "staff.duckdb", workers=4, max_work=20_000) as s:
        for name in ("erin", "frank"):
            s.tokens[name] = s.owner.add_analyst(name, quota=50.0)
        yield s


def post(served, path, token, body: str | dict, **headers) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(served.url + path, content=content, timeout=60,
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}", **headers})


def no_charge(served, response, before, status=400):
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "fix"}
    assert response.headers["cache-control"] == "no-store"
    assert served.state() == before


@pytest.mark.parametrize("body", [
    {"keys": [OUTLIERS[0]], "descents": 4611686018427387904},
    {"keys": [OUTLIERS[0]], "search": "random-walk", "samples": 2**62},
    {"keys": [OUTLIERS[0]], "search": "bfs", "descents": 2**62},
    {"keys": [OUTLIERS[0]], "search": "uniform", "samples": 2**62, "max_draws": 2**62},
    {"keys": [OUTLIERS[0]], "samples": 1_000_001},
], ids=["descents-2^62", "walk-samples", "bfs-descents", "uniform-draws", "samples-past-max"])
def test_the_unbounded_bodies_of_the_issue_are_400_and_free(served, body):
    before = served.state()
    r = post(served, "/v1/explain", served.tokens["alice"], {"dataset": "staff", "epsilon": 0.01, **body})
    no_charge(served, r, before)
    assert "must be ≤" in r.json()["error"]


@pytest.mark.parametrize("body", [{"beta": 2**1000}, {"beta": 1e308}, {"radius": 1e308}, {"k": 2**70}])
def test_huge_anomaly_options_are_refused_before_the_reservation(served, body):
    before = served.state()
    r = post(served, "/v1/identify", served.tokens["alice"],
             {"dataset": "staff", "value": {"pay": 1.0}, "beta": 2, "radius": 1.0, "epsilon": 0.1, **body})
    no_charge(served, r, before)


def test_the_schema_carries_every_maximum(served):
    document = httpx.get(served.url + "/openapi.json").json()
    explain = document["components"]["schemas"]["ExplainRequest"]["properties"]
    identify = document["components"]["schemas"]["IdentifyRequest"]["properties"]
    for props in (explain, identify):
        for name, schema in props.items():
            if schema.get("type") in ("integer", "number"):
                assert "maximum" in schema, name


@pytest.mark.parametrize("raw", [
    '{"dataset": "staff", "keys": ["\\udfff"], "epsilon": 0.01}',
    '{"dataset": "tagged", "keys": ["\\udfff"], "epsilon": 0.01}',
    '{"dataset": "staff", "keys": [10], "epsilon": 0.01, "verifier_options": {"\\ud800": 1}}',
    '{"dataset": "staff\\ud800", "keys": [10], "epsilon": 0.01}',
    '{"dataset": "tagged", "keys": ["a\\u0000b"], "epsilon": 0.01}',
], ids=["surrogate-key", "surrogate-text-key", "surrogate-option-name", "surrogate-dataset", "nul-key"])
def test_a_lone_surrogate_or_a_nul_is_a_400_not_a_500(served, raw):
    before = served.state()
    no_charge(served, post(served, "/v1/explain", served.tokens["alice"], raw), before)


@pytest.mark.parametrize(("dataset", "key"), [("staff", "42"), ("staff", "73944"), ("staff", 42.0), ("tagged", 7)])
def test_a_key_of_the_wrong_json_type_is_refused_before_any_charge(served, dataset, key):
    """Issue 26 item 3: "42" for an integer key column was charged, failed, and recorded answered."""
    before = served.state()
    r = post(served, "/v1/explain", served.tokens["alice"], {"dataset": dataset, "keys": [key], "epsilon": 0.01})
    no_charge(served, r, before)
    assert "column" in r.json()["error"] or "wrong type" in r.json()["error"]


def test_four_maximal_requests_never_keep_another_analysts_light_request_waiting(served):
    """Issue 26 item 1: four maximal bodies held every worker forever. Now each is capped (422,
    charged, history failed) and one analyst holds at most workers - 1 workers."""
    results: list[httpx.Response] = []
    heavy = [threading.Thread(target=lambda: results.append(post(served, "/v1/explain", served.tokens["alice"],
                                                                 {**HEAVY, "keys": [OUTLIERS[0]]})))
             for _ in range(4)]

    def heavy_rows() -> int:
        return len([h for h in served.owner.ledger.history() if h.analyst == "alice" and h.epsilon == 0.01])

    before = heavy_rows()
    for t in heavy:
        t.start()
    # An event, not a sleep: the light request is sent once the heavy ones hold the workers they
    # may (all but one: 3 of 4), or have all ended — so it is measured against busy workers.
    deadline = time.monotonic() + 60
    while heavy_rows() < before + 3 and any(t.is_alive() for t in heavy) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    light = post(served, "/v1/explain", served.tokens["bob"],
                 {"dataset": "staff", "keys": [OUTLIERS[1]], "epsilon": 0.05, "verifier": "grubbs"})
    waited = time.monotonic() - started
    for t in heavy:
        t.join(timeout=120)
    assert light.status_code == 200, light.text
    assert waited < 8.0, waited
    assert [r.status_code for r in results] == [422] * 4, [r.text for r in results]
    mine = [h for h in served.owner.ledger.history() if h.analyst == "alice" and h.epsilon == 0.01]
    assert len(mine) >= 4 and all(h.outcome == "failed" and h.reason == "work-cap" for h in mine[-4:])


def test_history_rows_equal_responses_across_a_mix_of_bodies(served):
    """Every response and the history rows it made: 200 → answered, 422 → failed, 4xx → none."""
    bodies = [{"dataset": "staff", "keys": [k], "epsilon": 0.02, "verifier": v}
              for k in (OUTLIERS[0], 3, "3", 10**30, OUTLIERS[2]) for v in ("grubbs", "zscore")]
    bodies += [{**HEAVY, "keys": [OUTLIERS[3]], "samples": 900_000}]
    for body in bodies:
        before = served.owner.ledger.history()
        r = post(served, "/v1/explain", served.tokens["erin"], body)
        new = served.owner.ledger.history()[len(before):]
        assert r.status_code < 500, r.text
        expected = {200: {"answered"}, 422: {"failed"}}.get(r.status_code, set())
        assert {h.outcome for h in new} == expected, (body, r.status_code, r.text)


def test_no_redirect_from_host_and_exact_paths(served):
    r = httpx.post(served.url + "/v1/explain/", headers={"Host": "evil.example", "Content-Type": "application/json"},
                   content="{}", follow_redirects=False)
    assert r.status_code == 404 and "location" not in r.headers
    assert r.headers["cache-control"] == "no-store" and set(r.json()) == {"error", "fix"}


def test_a_405_says_allow(served):
    r = httpx.delete(served.url + "/v1/explain")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and set(r.json()) == {"error", "fix"}
    assert r.headers["cache-control"] == "no-store"


def test_two_authorization_headers_are_a_400(served):
    headers = [("Authorization", f"Bearer {served.tokens['alice']}"), ("Authorization", "Bearer nope")]
    r = httpx.get(served.url + "/v1/me", headers=headers)
    assert r.status_code == 400 and "two Authorization" in r.json()["error"]


def test_a_token_in_the_query_string_is_a_400_and_never_logged(served, caplog):
    token = served.tokens["alice"]
    with caplog.at_level(logging.INFO, logger="pcor_sql.service"):
        for url in (f"/v1/me?token={token}", f"/v1/history?access_token={token}", f"/healthz?token={token}"):
            r = httpx.get(served.url + url, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 400 and "query string" in r.json()["error"]
        httpx.get(served.url + "/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert caplog.records and not any(token in record.getMessage() for record in caplog.records)
    assert any("/v1/me 200 analyst=alice" in record.getMessage() for record in caplog.records)


def test_history_pages_with_limit_and_before(served):
    headers = {"Authorization": f"Bearer {served.tokens['frank']}"}
    for key in OUTLIERS[:3]:
        post(served, "/v1/explain", served.tokens["frank"], {"dataset": "staff", "keys": [key], "epsilon": 0.02,
                                                             "verifier": "grubbs"})
    everything = httpx.get(served.url + "/v1/history", headers=headers).json()["history"]
    assert len(everything) == 3
    last_two = httpx.get(served.url + "/v1/history?limit=2", headers=headers).json()["history"]
    assert last_two == everything[-2:]
    older = httpx.get(served.url + f"/v1/history?limit=2&before={last_two[0]['release_id']}", headers=headers)
    assert older.json()["history"] == everything[:1]
    for bad in ("limit=0", "limit=abc", "limit=100000", "page=2", "limit=1&limit=2"):
        r = httpx.get(served.url + "/v1/history?" + bad, headers=headers)
        assert r.status_code == 400, bad


def test_owner_options_are_403_as_the_readme_says(served):
    before = served.state()
    for extra in ({"seed": 7}, {"owner_view": True}, {"max_contexts": 5}):
        r = post(served, "/v1/explain", served.tokens["alice"],
                 {"dataset": "staff", "keys": [OUTLIERS[0]], "epsilon": 0.1, **extra})
        no_charge(served, r, before, status=403)


def test_healthz_needs_no_token(served):
    r = httpx.get(served.url + "/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
