"""The client's side of the wire, without a service: what it sends (plain JSON, the bearer
token) and how an answer becomes a result or a `pcor_sql.errors` exception. Responses come from
httpx's MockTransport, so these pin the client's mapping; the service itself is exercised over
real HTTP in test_client_service.py."""

from __future__ import annotations

import json

import httpx
import pytest

from pcor_sql_client.remote_analyst import RemoteAnalyst, connect
from pcor_sql.errors import BudgetExceeded, Refused, RequestFailed, UserError

URL = "http://127.0.0.1:1"


def analyst_with(handler) -> RemoteAnalyst:
    return RemoteAnalyst(URL, "tok-en", client=httpx.Client(transport=httpx.MockTransport(handler)))


def answering(status: int, body) -> RemoteAnalyst:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return analyst_with(lambda request: httpx.Response(status, content=content))


def test_the_request_carries_the_token_and_plain_json():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(path=str(request.url), auth=request.headers["authorization"], body=json.loads(request.content))
        return httpx.Response(200, json={"results": [{"dataset": "d", "key": 42, "context": {"a": ["x"]},
                                                      "predicate": "a IN ('x')", "epsilon": 0.2, "verifier": "grubbs"}]})

    result = analyst_with(handler).explain_outlier("d", 42, epsilon=0.2, by=("a",))
    assert seen == {"path": URL + "/v1/explain", "auth": "Bearer tok-en",
                    "body": {"dataset": "d", "keys": [42], "epsilon": 0.2, "by": ["a"]}}
    assert (result.key, result.context, result.epsilon, result.verifier) == (42, {"a": ["x"]}, 0.2, "grubbs")
    assert result.as_dict()["predicate"] == "a IN ('x')"


@pytest.mark.parametrize(("status", "body", "expected"), [
    (400, {"error": "unknown option 'x'", "fix": "drop it"}, UserError),
    (401, {"error": "unauthorized", "fix": "check your token"}, Refused),
    (403, {"error": "key 7 is not releasable", "fix": "ask about a releasable key"}, Refused),
    (413, {"error": "the body is too large", "fix": "send less"}, UserError),
    (429, {"error": "the quota is spent", "fix": "ask the owner"}, BudgetExceeded),
    (422, {"error": "the request failed", "fix": "nothing"}, RequestFailed),
])
def test_a_refusal_becomes_the_matching_exception_with_the_services_words(status, body, expected):
    with pytest.raises(expected) as caught:
        answering(status, body).datasets()
    assert type(caught.value) is expected
    assert (caught.value.problem, caught.value.fix) == (body["error"], body["fix"])
    assert caught.value.status_code == status


@pytest.mark.parametrize("body", [b"<html>Bad Gateway</html>", b"", json.dumps({"detail": "x"}).encode()])
def test_an_answer_without_error_and_fix_is_one_user_error_naming_the_status(body):
    with pytest.raises(UserError, match="answered HTTP 502"):
        answering(502, body).me()


def test_a_success_that_is_not_json_is_a_user_error():
    with pytest.raises(UserError, match="not JSON"):
        answering(200, b"<html/>").me()


def test_no_server_is_one_user_error_naming_the_url():
    with pytest.raises(UserError, match=r"cannot reach the pcor-sql service at http://127\.0\.0\.1:1 ") as caught:
        connect(URL, "t", timeout=5).datasets()
    assert type(caught.value) is UserError
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_timeout_is_one_user_error():
    def handler(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(UserError, match="did not answer in time"):
        analyst_with(handler).me()


@pytest.mark.parametrize(("url", "token", "needle"), [
    ("", "t", "no service URL"), ("127.0.0.1:8000", "t", "not an http"), (URL, "", "no analyst token"),
    (URL, "a b", "malformed"), (URL, None, "no analyst token"),
])
def test_a_bad_url_or_token_is_refused_before_any_request(url, token, needle):
    with pytest.raises(UserError, match=needle):
        connect(url, token)


@pytest.mark.parametrize("bad", [float("nan"), object(), {1: 2}, b"x"])
def test_values_json_cannot_carry_are_refused_by_the_client(bad):
    def handler(request):  # pragma: no cover - never reached
        raise AssertionError("sent")

    with pytest.raises(UserError, match="request"):
        analyst_with(handler).explain_outlier("d", 1, epsilon=0.2, start=bad)


def test_the_token_is_not_in_the_repr():
    assert "tok-en" not in repr(analyst_with(lambda r: httpx.Response(200, json={})))


def test_identify_sends_one_point_per_request_and_keeps_the_order():
    sent = []

    def handler(request):
        body = json.loads(request.content)
        sent.append(body["value"])
        return httpx.Response(200, json={"results": [{"dataset": "d", "value": body["value"],
                                                      "anomaly": body["value"]["m"] > 5, "epsilon": 0.5,
                                                      "privacy": "sp"}]})

    handle = analyst_with(handler)
    answers = [handle.identify_value("d", p, beta=2, radius=1, epsilon=0.5) for p in ({"m": 9}, {"m": 1})]
    assert sent == [{"m": 9}, {"m": 1}]
    assert [(a.value, a.anomaly) for a in answers] == [({"m": 9}, True), ({"m": 1}, False)]


def test_an_identify_answer_must_be_one():
    with pytest.raises(UserError, match="2 answers for one point"):
        answering(200, {"results": [{}, {}]}).identify_value("d", {"m": 1}, beta=1, radius=1, epsilon=0.1)
