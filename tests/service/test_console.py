"""The owner console over real HTTP (uvicorn on 127.0.0.1; DESIGN.md §9 "The owner console"): login and its cookie, a
session on every page, CSRF and cross-site refusals, the analysts' forms doing what they say,
history filters and pages, nothing loaded from elsewhere, every ledger value escaped."""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.applications import Starlette

from pcor_sql.ledger.analysts import authenticate
from pcor_sql.service.console_app import console_routes
from pcor_sql.service.owner_plane import OwnerPlane
from tests.service.console_fixture import OWNER_TOKEN, check_token, make_owner
from tests.service.live_server import live_server

#: The session's pages, under its base path `/console/<key>` (`enter` logs in and returns it).
PAGES = ("", "/datasets", "/analysts", "/history", "/spending", "/audit")
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    owner, tokens = make_owner(str(tmp_path_factory.mktemp("console") / "ledger.duckdb"), history=300)
    owner.ledger.read_with(lambda ops: ops.raw(
        "UPDATE pcor.history SET statement = $1, record_key = $1 WHERE release_id = (SELECT max(release_id)"
        " FROM pcor.history)", [HOSTILE]))
    found = OwnerPlane(owner)
    found.audit.write({"time": "2026-01-01T00:00:00Z", "analyst": HOSTILE, "endpoint": "/v1/explain",
                       "dataset": HOSTILE, "epsilon": 0.1, "outcome": "answered", "status": 200, "latency_ms": 3.2})
    found.audit.write({"time": HOSTILE, "analyst": None, "endpoint": "/v1/me", "epsilon": HOSTILE, "status": 401})
    found.tokens = tokens
    return found


@pytest.fixture(scope="module")
def served(plane):
    with live_server(Starlette(routes=console_routes(plane, check_token))) as url:
        yield url


@pytest.fixture
def client(served):
    with httpx.Client(base_url=served, follow_redirects=False, timeout=30) as c:
        yield c


def login(client, token=OWNER_TOKEN):
    return client.post("/console/login", data={"token": token})


def enter(client) -> str:
    """Log in; the session's base path (`/console/<key>`)."""
    r = login(client)
    assert r.status_code == 303 and re.fullmatch(r"/console/[A-Za-z0-9_-]{32}", r.headers["location"]), r.headers
    return r.headers["location"]


def csrf(client, path) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get(path).text).group(1)


def test_every_page_needs_a_session(client):
    base = enter(client)
    client.cookies.clear()
    for path in (*(base + p for p in PAGES), *("/console" + p for p in PAGES)):
        r = client.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/console/login", path
        client.cookies.set("pcor_console", "made-up-session-id", domain="127.0.0.1", path="/console")
        assert client.get(path).status_code == 303
        client.cookies.clear()
    r = client.get("/console/login")
    assert r.status_code == 200 and 'name="token"' in r.text and 'type="password"' in r.text


def test_login_sets_an_httponly_samesite_strict_cookie_with_a_fresh_id(client):
    seen, bases = set(), set()
    for _ in range(2):
        r = login(client)
        base = r.headers["location"]
        assert r.status_code == 303 and re.fullmatch(r"/console/[A-Za-z0-9_-]{32}", base)
        cookie = r.headers["set-cookie"]
        attributes = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")[1:]}
        assert "httponly" in attributes and attributes["samesite"].lower() == "samesite=strict"
        assert attributes["path"] == f"Path={base}"  # scoped to the session's own unguessable path
        seen.add(cookie.split(";")[0])
        bases.add(base)
    assert len(seen) == 2 and len(bases) == 2  # every login a new id and key: a planted one is never promoted


@pytest.mark.parametrize("token", ["wrong", "", OWNER_TOKEN + "x", "analyst"])
def test_a_wrong_token_or_an_analysts_token_is_refused(client, plane, token):
    token = plane.tokens["alice"] if token == "analyst" else token
    r = login(client, token)
    assert r.status_code == 401 and "set-cookie" not in r.headers
    assert "not the owner token" in r.text and 'name="token"' in r.text
    assert client.get("/console").status_code == 303 and not client.cookies


def test_every_page_after_login_is_reachable_by_links_and_strictly_headed(client):
    base = enter(client)
    seen, queue = set(), [base]
    while queue:
        path = queue.pop()
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert r.headers["cache-control"] == "no-store" and r.headers["x-frame-options"] == "DENY"
        policy = r.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'none'" in policy and "http" not in policy
        seen.add(path)
        for link in re.findall(r'<nav>.*?</nav>', r.text, re.S)[0].split('href="')[1:]:
            target = link.split('"')[0]
            if target not in seen and target not in queue:
                queue.append(target)
    assert seen == {base + p for p in PAGES}


def test_nothing_is_loaded_from_anywhere_else(client):
    base = enter(client)
    for path in (*(base + p for p in PAGES), "/console/login", base + "/history?offset=50"):
        text = client.get(path).text
        assert "<script" not in text.lower() and "@import" not in text and "url(" not in text
        for attribute in re.findall(r'(?:src|href|action|xlink:href)\s*=\s*"([^"]*)"', text, re.I):
            assert attribute.startswith("/console") and not attribute.startswith("//"), (path, attribute)
        assert not re.search(r"(?:src|href|action)\s*=\s*['\"]?\s*(?:https?:)?//", text, re.I)


def test_ledger_values_are_escaped_everywhere(client):
    base = enter(client)
    for path in (base, base + "/history", base + "/audit"):
        text = client.get(path).text
        assert "<script>alert" not in text and "<img src=x" not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, path


def test_a_post_without_session_csrf_or_from_another_site_is_refused(client, plane):
    def revoked() -> bool:
        return next(a for a in plane.analysts() if a["name"] == "carol")["revoked"]

    base = enter(client)
    token = csrf(client, base + "/analysts")
    form = {"name": "carol", "csrf": token}
    assert client.post(base + "/analysts/revoke", data={"name": "carol"}).status_code == 403  # replay, no token
    assert client.post(base + "/analysts/revoke", data={**form, "csrf": token[:-1] + "x"}).status_code == 403
    for headers in ({"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": str(client.base_url).rstrip("/") + ".evil.example"},
                    {"Origin": str(client.base_url).rstrip("/").replace("127.0.0.1", "localhost")}):
        r = client.post(base + "/analysts/revoke", data=form, headers=headers)
        assert r.status_code == 403 and "another site" in r.text, headers
    with httpx.Client(base_url=client.base_url) as other:  # no session, someone's CSRF token
        assert other.post(base + "/analysts/revoke", data=form).status_code == 403
    assert client.post("/console/login", data={"token": OWNER_TOKEN},
                       headers={"Origin": "https://evil.example"}).status_code == 403
    assert not revoked()
    r = client.post(base + "/analysts/revoke", data=form, headers={"Origin": str(client.base_url).rstrip("/")})
    assert r.status_code == 303 and revoked()
    client.post(base + "/analysts/rotate", data=form)  # reinstated for the other tests


def test_revoke_rotate_quota_and_add_through_the_forms(client, plane):
    base = enter(client)
    token = csrf(client, base + "/analysts")
    old = plane.tokens["bob"]
    assert authenticate(plane.ledger, old) is not None
    r = client.post(base + "/analysts/revoke", data={"name": "bob", "csrf": token})
    assert r.status_code == 303 and r.headers["location"] == base + "/analysts"
    assert "Revoked bob" in client.get(base + "/analysts").text
    assert "Revoked bob" not in client.get(base + "/analysts").text  # the message is shown once
    assert authenticate(plane.ledger, old) is None
    r = client.post(base + "/analysts/rotate", data={"name": "bob", "csrf": token})
    new = re.search(r'<code class="token">([^<]+)</code>', r.text).group(1)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert authenticate(plane.ledger, new) is not None and authenticate(plane.ledger, old) is None
    plane.tokens["bob"] = new
    client.post(base + "/analysts/quota", data={"name": "bob", "epsilon": "3.5", "notion": "sp", "dataset": "staff",
                                                 "csrf": token})
    usage = next(a for a in plane.analysts() if a["name"] == "bob")["usage"]
    assert any(u["notion"] == "sp" and u["dataset"] == "staff" and u["limit"] == 3.5 for u in usage)
    client.post(base + "/analysts/quota", data={"name": "bob", "epsilon": "", "notion": "sp", "dataset": "staff",
                                                 "csrf": token})
    usage = next(a for a in plane.analysts() if a["name"] == "bob")["usage"]
    assert not any(u["notion"] == "sp" and u["dataset"] == "staff" and u["limit"] is not None for u in usage)
    r = client.post(base + "/analysts/add", data={"name": "dora", "quota": "2", "notion": "ocdp",
                                                   "datasets": "staff", "csrf": token})
    assert authenticate(plane.ledger, re.search(r'class="token">([^<]+)<', r.text).group(1)) is not None


@pytest.mark.parametrize("form, message", [({"name": "nobody"}, "nobody"), ({"name": "bob", "epsilon": "-1"}, "≥ 0"),
                                           ({"name": "bob", "epsilon": "lots"}, "must be a number"), ({}, "no analyst")])
def test_a_bad_form_says_what_and_how_on_the_analysts_page(client, form, message):
    base = enter(client)
    path = base + ("/analysts/quota" if "epsilon" in form else "/analysts/revoke")
    r = client.post(path, data={**form, "notion": "ocdp", "csrf": csrf(client, base + "/analysts")})
    assert r.status_code == 303
    page = client.get(base + "/analysts").text
    assert 'class="flash error"' in page and message in page and "Traceback" not in page


def test_history_filters_pages_and_says_what_was_asked(client, plane):
    base = enter(client)
    r = client.get(base + "/history?analyst=carol&outcome=answered")
    assert r.status_code == 200
    rows = re.findall(r"<tbody>(.*)</tbody>", r.text, re.S)[0].split("<tr>")[1:]
    expected = plane.history(analyst="carol", outcome="answered", limit=1)["total"]
    assert 0 < len(rows) == min(50, expected) and f"of {expected}" in r.text
    assert all("carol" in row and "answered" in row for row in rows)
    assert "EXPLAIN OUTLIER SELECT" in r.text and "USING" in r.text  # what was asked: the statement
    total = plane.history(limit=1)["total"]
    first = client.get(base + "/history").text
    assert "older ›" in first and "newer" not in first
    last = client.get(f"{base}/history?offset={(total - 1) // 50 * 50}").text
    assert "‹ newer" in last and "older ›" not in last and f"of {total}" in last
    for bad in ("offset=-1", "offset=x", "outcome=won"):
        r = client.get(f"{base}/history?{bad}")
        assert r.status_code == 400 and "Traceback" not in r.text


def test_spending_is_drawn_as_svg_step_lines_with_axes(client):
    base = enter(client)
    text = client.get(base + "/spending").text
    assert text.count('<svg class="chart"') == 2
    assert "ε spent (cumulative)" in text and "time (UTC" in text
    assert re.search(r'<path d="M[\d.]+,[\d.]+(H[\d.]+V[\d.]+)+H\d+"', text)
    assert "main.staff (ocdp)" in text and "alice (ocdp)" in text


def test_the_console_is_on_the_owner_listener_of_the_real_service(plane):
    import pcor_sql.service

    analysts = pcor_sql.service.app(plane.owner, workers=1, warm=False, processes=False)
    owners = pcor_sql.service.owner_app(analysts.state.service, OWNER_TOKEN)
    with live_server(owners) as url, httpx.Client(base_url=url, follow_redirects=False, timeout=30) as client:
        assert client.get("/console/analysts").headers["location"] == "/console/login"
        assert login(client, plane.tokens["carol"]).status_code == 401
        base = enter(client)
        for path in PAGES:
            assert client.get(base + path).status_code == 200, path
    with live_server(analysts) as url:
        assert httpx.get(url + "/console/login").status_code == 404  # never on the analysts' listener


def test_logout_ends_the_session(client):
    base = enter(client)
    r = client.post(base + "/logout", data={"csrf": csrf(client, base)})
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
    assert client.get(base).status_code == 303
