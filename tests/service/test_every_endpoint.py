"""Every endpoint is declared once (DESIGN.md §8, §9): each listener serves exactly the rows of its
tables — the owner's JSON API and the console's pages — and docs/owner-plane.md's console table
lists the console's rows, none missing, none that the service does not serve."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from starlette.routing import Route

from pcor_sql.service.console_app import CONSOLE_ENDPOINTS, Access, console_routes
from pcor_sql.service.every_endpoint import every_endpoint
from pcor_sql.service.owner_app import OWNER_ENDPOINTS, owner_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "owner-plane.md"


class _Service:
    """The least an owner app needs to be built (its routes are read, never called)."""

    limits = None
    audit = None


def _routes(app) -> set[tuple[str, str]]:
    found = set()
    for route in app.app.router.routes:
        assert isinstance(route, Route), route
        found |= {(m, route.path) for m in route.methods - {"HEAD"}}
    return found


def test_the_owner_listener_serves_exactly_its_rows(monkeypatch):
    module = importlib.import_module("pcor_sql.service.owner_app")  # the package exports a function of that name

    monkeypatch.setattr(module, "document", lambda *a, **k: {})
    monkeypatch.setattr(module, "OwnerService", lambda service, token, commands: type(
        "Owner", (), {"plane": None, "check_token": staticmethod(lambda t: False), "authenticate": None})())
    served = _routes(owner_app(_Service(), "t"))
    declared = {(e.method, e.path) for e in (*OWNER_ENDPOINTS, *CONSOLE_ENDPOINTS)}
    assert served == declared, (sorted(served - declared), sorted(declared - served))
    assert {(m, p) for listener, m, p, _ in every_endpoint() if listener == "owner"} == declared


def test_the_console_routes_are_its_rows_in_order_and_login_comes_before_a_session_path():
    routes = console_routes(None, lambda text: False)  # type: ignore[arg-type]
    assert [(next(iter(r.methods - {"HEAD"})), r.path) for r in routes] == [(e.method, e.path) for e in CONSOLE_ENDPOINTS]
    paths = [e.path for e in CONSOLE_ENDPOINTS]
    # `/console/login` would be read as a session key if `/console/{key}` came first
    assert paths.index("/console/login") < paths.index("/console/{key}")
    assert all(e.method == "POST" for e in CONSOLE_ENDPOINTS if e.access is Access.FORM)
    assert all(e.method == "GET" for e in CONSOLE_ENDPOINTS if e.access is Access.PAGE)


def test_the_console_table_of_the_docs_is_the_consoles():
    table = DOC.read_text(encoding="utf-8").split("### Console routes", 1)[1]
    documented = set(re.findall(r"^\| `(GET|POST) (/[^`\s]*)` \| (\w+) \|", table, flags=re.M))
    declared = {(e.method, e.path, str(e.access)) for e in CONSOLE_ENDPOINTS}
    assert documented == declared, (sorted(declared - documented), sorted(documented - declared))


def test_every_endpoint_names_each_analyst_route_once():
    rows = [(listener, m, p) for listener, m, p, _ in every_endpoint()]
    assert len(rows) == len(set(rows))
    assert ("analyst", "POST", "/v1/explain") in rows and ("analyst", "GET", "/") in rows
