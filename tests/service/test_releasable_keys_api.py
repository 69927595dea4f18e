"""GET /v1/releasable-keys (DESIGN.md §6: the releasable keys are public by registration), the
light client's `releasable_keys` and `history(limit, before)`, and the one 401 text."""

from __future__ import annotations

import httpx
import pytest

import pcor_sql
import pcor_sql.service
from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS
from tests.service.console_fixture import make_owner
from tests.service.live_server import live_server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    owner, tokens = make_owner(str(tmp_path_factory.mktemp("keys") / "ledger.duckdb"))
    with live_server(pcor_sql.service.app(owner, workers=2, warm=False, processes=False), start_timeout=120) as url:
        yield owner, url, tokens


def get(url, token, path):
    return httpx.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_the_keys_come_paged_in_their_frozen_order_as_the_key_columns_json(served):
    _, url, tokens = served
    first = get(url, tokens["alice"], "/v1/releasable-keys?dataset=staff&limit=3")
    assert first.status_code == 200, first.text
    assert first.json() == {"dataset": "staff", "total": 150, "offset": 0, "keys": [0, 1, 10]}
    later = get(url, tokens["alice"], "/v1/releasable-keys?dataset=staff&limit=1000&offset=148").json()
    assert later["keys"] == [98, 99] and later["total"] == 150
    none = get(url, tokens["alice"], "/v1/releasable-keys?dataset=payroll").json()
    assert none == {"dataset": "payroll", "total": None, "offset": 0, "keys": []}


@pytest.mark.parametrize(("query", "status"), [("", 400), ("?dataset=staff&limit=0", 400),
                                               ("?dataset=staff&offset=-1", 400), ("?dataset=nope", 403)])
def test_bad_pages_are_refused(served, query, status):
    _, url, tokens = served
    r = get(url, tokens["alice"], "/v1/releasable-keys" + query)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error", "fix"}


def test_the_endpoint_is_in_the_table_and_the_document(served):
    _, url, _ = served
    assert any(e.path == "/v1/releasable-keys" for e in ANALYST_ENDPOINTS)
    doc = httpx.get(url + "/openapi.json").json()
    op = doc["paths"]["/v1/releasable-keys"]["get"]
    assert {p["name"] for p in op["parameters"]} >= {"dataset", "limit", "offset"}


def test_the_client_lists_keys_and_pages_its_history(served):
    _, url, tokens = served
    with pcor_sql.connect(url, tokens["bob"]) as remote:
        assert remote.releasable_keys("staff", limit=2, offset=1)["keys"] == [1, 10]
        for key in (10, 41, 72):
            remote.explain_outliers("staff", [key], epsilon=0.1, verifier="grubbs")
        everything = remote.history()
        [latest] = remote.history(limit=1)
        assert latest == everything[-1]
        older = remote.history(before=latest["release_id"])
        assert older == everything[:-1]


@pytest.mark.parametrize("header", ["Bearer pcor_" + "x" * 43, "Bearer", "Basic abc", None, "revoked"])
def test_every_401_says_the_token_is_not_valid_and_to_ask_the_owner(served, header):
    owner, url, tokens = served
    if header == "revoked":
        header = f"Bearer {tokens['carol']}"
        owner.revoke_analyst("carol")
    r = httpx.get(url + "/v1/me", headers={"Authorization": header} if header else {}, timeout=30)
    assert r.status_code == 401, r.text
    body = r.json()
    assert "not valid" in body["error"] and "ask the data owner for a new one" in body["fix"], body
    assert body == httpx.get(url + "/v1/me", headers={"Authorization": "Bearer nope"}).json()  # one text
