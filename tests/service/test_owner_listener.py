"""The owner's listener (DESIGN.md §9 "A separate owner listener") over real HTTP on 127.0.0.1: the owner token
only, owner paths never on the analysts' port, revocation and rotation at once (also with
requests in flight), and an audit log without tokens."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

import pcor_sql.service
from pcor_sql.service.owner_app import LoopbackOnly, owner_app
from pcor_sql.service.owner_plane import AuditLog
from tests.client.served_dataset import OUTLIERS, make_database, register
from tests.service.live_server import live_listeners

TOKEN = "pcor_owner_test-token-0123456789"
BODY = {"dataset": "staff", "epsilon": 0.05, "verifier": "grubbs"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("owner")
    con = make_database(path / "staff.duckdb")
    try:
        owner, tokens = register(con, quota=50.0)
        audit = AuditLog(path / "audit.jsonl")
        analysts = pcor_sql.service.app(owner, workers=4, audit=audit)
        owners = owner_app(analysts.state.service, TOKEN)
        with live_listeners(analysts, owners) as (url, owner_url):
            yield owner, tokens, url, owner_url, path / "audit.jsonl"
    finally:
        con.close()


def as_owner(method: str, url: str, token: str = TOKEN, **kw) -> httpx.Response:
    return httpx.request(method, url, headers={"Authorization": f"Bearer {token}"}, timeout=60, **kw)


def explain(url: str, token: str, key: int = OUTLIERS[0]) -> httpx.Response:
    return httpx.post(url + "/v1/explain", content=json.dumps({**BODY, "keys": [key]}), timeout=60,
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})


def test_only_the_owner_token_opens_the_owner_listener(served):
    owner, tokens, url, owner_url, _ = served
    assert as_owner("GET", owner_url + "/v1/owner/analysts").status_code == 200
    for token in (tokens["alice"], "nope", TOKEN + "x"):
        r = as_owner("GET", owner_url + "/v1/owner/analysts", token)
        assert r.status_code == 401 and set(r.json()) == {"error", "fix"}
    assert httpx.get(owner_url + "/v1/owner/analysts").status_code == 401


def test_the_analysts_port_serves_no_owner_path(served):
    owner, tokens, url, owner_url, _ = served
    for path in ("/v1/owner/analysts", "/v1/owner/history", "/console", "/v1/owner/openapi.json"):
        assert as_owner("GET", url + path).status_code == 404, path
    assert httpx.get(url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(owner_url + "/healthz").json() == {"status": "ok"}
    # and the owner's port serves no analyst endpoint
    assert explain(owner_url, tokens["alice"]).status_code == 404


def test_owner_openapi_has_two_security_schemes_of_its_own(served):
    _, _, url, owner_url, _ = served
    document = httpx.get(owner_url + "/v1/owner/openapi.json").json()
    assert set(document["components"]["securitySchemes"]) == {"owner"}
    assert all(p.startswith(("/v1/owner/", "/healthz")) for p in document["paths"])
    assert "/v1/explain" in httpx.get(url + "/openapi.json").json()["paths"]


def test_rotation_kills_the_old_token_at_once_and_keeps_the_history(served):
    owner, tokens, url, owner_url, _ = served
    name = "rota"
    old = owner.add_analyst(name, quota=5.0)
    assert explain(url, old).status_code == 200
    r = as_owner("POST", owner_url + f"/v1/owner/analysts/{name}/rotate")
    new = r.json()["token"]
    assert r.status_code == 200 and new != old
    assert explain(url, old).status_code == 401
    assert explain(url, new).status_code == 200
    history = httpx.get(url + "/v1/history", headers={"Authorization": f"Bearer {new}"}).json()["history"]
    assert len(history) == 2  # the request made with the old token is still theirs


def test_revocation_with_sixteen_requests_in_flight(served):
    """0 reservations after the revocation answers; the next request is a 401."""
    owner, tokens, url, owner_url, _ = served
    name = "busy"
    token = owner.add_analyst(name, quota=50.0)
    statuses: list[int] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        r = explain(url, token, OUTLIERS[i % len(OUTLIERS)])
        with lock:
            statuses.append(r.status_code)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not [h for h in owner.ledger.history() if h.analyst == name] and time.monotonic() < deadline:
        time.sleep(0.005)  # polling the ledger: revoke once some are reserved, while others still wait
    r = as_owner("POST", owner_url + f"/v1/owner/analysts/{name}/revoke")
    assert r.status_code == 200
    revoked_at = owner.ledger.read_with(lambda ops: ops.raw("SELECT revoked_at FROM pcor.analysts WHERE name = $1",
                                                            [name]))[0][0]
    for t in threads:
        t.join(timeout=120)
    rows = [h for h in owner.ledger.history() if h.analyst == name]
    assert rows and all(h.released_at <= revoked_at for h in rows), (revoked_at, [h.released_at for h in rows])
    assert all(h.outcome in ("answered", "failed") for h in rows)  # reserved ones finished and were recorded
    assert set(statuses) <= {200, 401, 403} and len(statuses) == 16
    assert explain(url, token).status_code == 401


def test_quota_history_and_spending_through_the_owner_api(served):
    owner, tokens, url, owner_url, _ = served
    r = as_owner("POST", owner_url + "/v1/owner/analysts", json={"name": "quin", "quota": 1.0})
    token = r.json()["token"]
    assert explain(url, token).status_code == 200
    r = as_owner("POST", owner_url + "/v1/owner/analysts/quin/quota", json={"epsilon": None})
    assert r.status_code == 200
    page = as_owner("GET", owner_url + "/v1/owner/history?analyst=quin&limit=5").json()
    assert page["total"] == 1 and page["rows"][0]["analyst"] == "quin" and page["rows"][0]["asked"] is not None
    series = as_owner("GET", owner_url + "/v1/owner/spending?by=analyst").json()["series"]
    assert series["quin (ocdp)"][-1][1] == pytest.approx(0.05)
    for bad in ("/v1/owner/history?outcome=nope", "/v1/owner/history?limit=0", "/v1/owner/spending?by=x",
                "/v1/owner/history?token=" + TOKEN):
        assert as_owner("GET", owner_url + bad).status_code == 400, bad
    assert as_owner("POST", owner_url + "/v1/owner/analysts/nobody/revoke").status_code == 400


def test_the_audit_log_has_one_line_per_request_and_no_token(served):
    owner, tokens, url, owner_url, audit_path = served
    explain(url, tokens["alice"])
    explain(url, "wrong-token")
    lines = [json.loads(line) for line in audit_path.read_text(encoding="utf-8").splitlines()]
    assert {"time", "analyst", "endpoint", "dataset", "epsilon", "outcome", "status", "latency_ms"} <= set(lines[-1])
    assert lines[-2]["analyst"] == "alice" and lines[-2]["status"] == 200 and lines[-2]["outcome"] == "answered"
    assert lines[-2]["dataset"] == "staff" and lines[-2]["epsilon"] == 0.05
    assert lines[-1]["status"] == 401 and lines[-1]["analyst"] is None
    text = audit_path.read_text(encoding="utf-8")
    assert not any(token in text for token in tokens.values()) and TOKEN not in text
    shown = as_owner("GET", owner_url + "/v1/owner/audit?limit=2").json()["audit"]
    assert shown[0]["status"] == 401


def test_a_client_off_loopback_is_refused():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope)

    guard = LoopbackOnly.__new__(LoopbackOnly)
    guard.app = app
    sent = []

    async def send(message):
        sent.append(message)

    import asyncio

    asyncio.run(guard({"type": "http", "client": ("10.0.0.7", 5000), "headers": []}, None, send))
    assert sent[0]["status"] == 403 and not seen
    asyncio.run(guard({"type": "http", "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8001), "scheme": "http",
                       "headers": [(b"host", b"127.0.0.1:8001")]}, None, send))
    assert seen
