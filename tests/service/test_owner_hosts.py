"""The owner's listener answers loopback Hosts only (DESIGN.md §9, DNS rebinding), over real HTTP
on 127.0.0.1: `Host: evil.example` (with or without the port), another port, or no port are a
421 with {error, fix} on every path, the owner token never in it; the console's same-origin
check takes an Origin only when it is this listener on a loopback name, never "equal to Host"."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.applications import Starlette

import pcor_sql.service
from pcor_sql.service.console_app import console_routes
from pcor_sql.service.owner_app import owner_app
from pcor_sql.service.owner_plane import OwnerPlane
from tests.service.console_fixture import OWNER_TOKEN, check_token, make_owner
from tests.service.live_server import live_listeners, live_server


@pytest.fixture(scope="module")
def owner(tmp_path_factory):
    found, _ = make_owner(str(tmp_path_factory.mktemp("hosts") / "ledger.duckdb"))
    return found


@pytest.fixture(scope="module")
def listener(owner):
    analysts = pcor_sql.service.app(owner, workers=1, warm=False, processes=False)
    with live_listeners(analysts, owner_app(analysts.state.service, OWNER_TOKEN)) as (_, url):
        yield url


def port_of(url: str) -> int:
    return urlsplit(url).port


def get(url: str, path: str, host: str, **kw) -> httpx.Response:
    return httpx.get(url + path, headers={"Host": host, "Authorization": f"Bearer {OWNER_TOKEN}"}, timeout=30, **kw)


def foreign_hosts(port: int) -> list[str]:
    return ["evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", f"localhost:{port}.evil",
            f"127.0.0.1.nip.io:{port}", f"10.0.0.1:{port}"]


def test_a_foreign_host_gets_421_on_every_path(listener):
    port = port_of(listener)
    for host in foreign_hosts(port):
        for path in ("/v1/owner/analysts", "/healthz", "/console/login", "/v1/owner/openapi.json"):
            r = get(listener, path, host)
            assert r.status_code == 421 and set(r.json()) == {"error", "fix"}, (host, path, r.status_code)
            assert OWNER_TOKEN not in r.text and "loopback" in r.json()["error"]


def test_loopback_names_with_the_listeners_port_are_answered(listener):
    port = port_of(listener)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert get(listener, "/v1/owner/analysts", host).status_code == 200, host
        assert get(listener, "/console/login", host).status_code == 200, host


def test_dns_rebinding_cannot_log_in_or_post_a_form(listener, owner):
    """The rebinding page's request: Host and Origin both name evil.example with the port."""
    port = port_of(listener)
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    r = httpx.post(listener + "/console/login", data={"token": OWNER_TOKEN}, headers=rebound, timeout=30)
    assert r.status_code == 421 and "set-cookie" not in r.headers


def test_the_consoles_origin_check_is_the_loopback_allow_list(owner):
    """The console's routes alone (an owner's app may mount them without the listener's Host
    check): an Origin equal to a rebound Host is another site; this listener's own is not."""
    plane = OwnerPlane(owner)
    with live_server(Starlette(routes=console_routes(plane, check_token))) as url, \
            httpx.Client(base_url=url, follow_redirects=False, timeout=30) as client:
        port = port_of(url)
        for host in (f"evil.example:{port}", f"127.0.0.1:{port + 1}", f"evil.example"):
            r = client.post("/console/login", data={"token": OWNER_TOKEN},
                            headers={"Host": host, "Origin": f"http://{host}"})
            assert r.status_code == 403 and "another site" in r.text and "set-cookie" not in r.headers, host
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            r = client.post("/console/login", data={"token": OWNER_TOKEN},
                            headers={"Host": host, "Origin": f"http://{host}"})
            assert r.status_code == 303 and "set-cookie" in r.headers, host
            assert re.match(r"pcor_console=", r.headers["set-cookie"])
