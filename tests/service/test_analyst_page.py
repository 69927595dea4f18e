"""The analyst page (DESIGN.md §9 "The analyst page") over real HTTP (uvicorn on 127.0.0.1): served at `/` beside the
JSON API, under a policy that lets run exactly its own script and style, loading nothing from
anywhere, keeping the token out of URLs, cookies and storage. (It is used in a real browser in
`test_console_browser.py`.)"""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
import pytest

import pcor_sql.service
from tests.service.console_fixture import make_owner
from tests.service.live_server import live_server


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    owner, tokens = make_owner(str(tmp_path_factory.mktemp("page") / "ledger.duckdb"))
    app = pcor_sql.service.app(owner, workers=2, warm=False, processes=False)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        c.tokens = tokens
        yield c


def digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_is_served_at_the_root_beside_the_api(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["cache-control"] == "no-store" and r.headers["x-frame-options"] == "DENY"
    assert client.post("/").status_code == 405
    me = client.get("/v1/me", headers={"Authorization": f"Bearer {client.tokens['alice']}"})
    assert me.status_code == 200 and me.json()["analyst"] == "alice"


def test_only_its_own_script_and_style_may_run_and_nothing_is_loaded_from_elsewhere(client):
    r = client.get("/")
    policy = dict(part.strip().split(" ", 1) for part in r.headers["content-security-policy"].split(";"))
    [script] = re.findall(r"<script>(.*?)</script>", r.text, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", r.text, re.S)
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["script-src"] == digest(script) and policy["style-src"] == digest(style)
    assert "unsafe" not in r.headers["content-security-policy"]
    assert "http://" not in r.text and "https://" not in r.text and "@import" not in r.text and "url(" not in r.text
    assert not re.search(r"\b(?:src|href)\s*=", r.text, re.I) and "<form" not in r.text.lower()


def test_the_token_goes_only_into_the_authorization_header(client):
    script = re.findall(r"<script>(.*?)</script>", client.get("/").text, re.S)[0]
    for never in ("localStorage", "sessionStorage", "document.cookie", "location", "innerHTML", "indexedDB"):
        assert never not in script, never
    assert script.count("token") and '"Authorization": "Bearer " + token' in script
    assert 'credentials: "omit"' in script  # no cookie of this origin rides along either


def test_the_identify_box_is_labelled_as_a_value_to_test():
    """Without a browser: the label the page's script writes (the browser test clicks it)."""
    from pcor_sql.service.analyst_page import SCRIPT

    assert '"value of " + m + " to test"' in SCRIPT and "a point of" in SCRIPT
