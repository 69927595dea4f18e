"""The owner console and the analyst page in a real headless Chromium (DESIGN.md §9 "The owner console", §9 "The analyst page"),
each app on a real uvicorn on 127.0.0.1: log in, follow the links, revoke and rotate through
the forms, a wrong owner token and an analyst's token refused, a cross-site form refused even
with a leaked CSRF token, and no request to any other origin; the analyst page: paste a token,
see datasets, quota and history, preview a cost, ask and read the answer.

`PCOR_SCREENSHOTS=docs/img` saves the README's screenshots."""

from __future__ import annotations

import re
import secrets
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

import pcor_sql.service
from pcor_sql.ledger.analysts import authenticate
from pcor_sql.service.console_app import console_routes
from pcor_sql.service.owner_plane import OwnerPlane
from tests.service import browser as chrome
from tests.service.console_fixture import OWNER_TOKEN, check_token, make_owner
from tests.service.live_server import live_server

pytestmark = pytest.mark.skipif(chrome.missing() is not None, reason=chrome.missing() or "")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    owner, tokens = make_owner(str(tmp_path_factory.mktemp("browser") / "ledger.duckdb"), history=400)
    plane = OwnerPlane(owner)
    plane.audit.write({"time": "2026-11-27T09:12:03Z", "analyst": "alice", "endpoint": "POST /v1/explain",
                       "dataset": "staff", "epsilon": 0.2, "outcome": "answered", "status": 200, "latency_ms": 41.7})
    analysts = pcor_sql.service.app(owner, workers=2, warm=False, processes=False)
    leaked: dict[str, str] = {}
    cookies: list[tuple[str, str]] = []  # (path, Cookie header) of every request the other port received

    async def evil(request):  # another origin on the same host: posts the console's form with a leaked CSRF token
        cookies.append((request.url.path, request.headers.get("cookie", "")))
        return HTMLResponse(f'<form id="f" method="post" action="{leaked["console"]}{leaked["base"]}/analysts/revoke">'
                            f'<input name="name" value="carol"><input name="csrf" value="{leaked["csrf"]}"></form>'
                            '<button id="go" onclick="document.getElementById(\'f\').submit()">go</button>')

    async def listen(request):  # any other path of the other port: what the owner's browser sends it
        cookies.append((request.url.path, request.headers.get("cookie", "")))
        return HTMLResponse("<p>hello</p>")

    other_app = Starlette(routes=[Route("/", evil), Route("/{rest:path}", listen, methods=["GET", "POST"])])
    with live_server(Starlette(routes=console_routes(plane, check_token))) as console, \
            live_server(analysts) as analyst, live_server(other_app) as other:
        leaked["console"] = console
        yield {"plane": plane, "tokens": tokens, "console": console, "analyst": analyst, "other": other,
               "leaked": leaked, "cookies": cookies}


@pytest.fixture(scope="module")
def driver():
    yield from chrome.browser()


def by(driver, css):
    return driver.find_element("css selector", css)


def wait_for(driver, css, text=None, timeout=30.0):
    """The first element matching `css` (holding `text`) once it shows; if it never does, the
    failure says what the page shows instead."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d):
        elements = d.find_elements("css selector", css)
        return elements and (text is None or any(text in e.text for e in elements)) and elements[0]
    try:
        return WebDriverWait(driver, timeout).until(found)
    except TimeoutException:
        raise AssertionError(f"{css} {text or ''} never showed; the page says: {by(driver, 'body').text[:2000]}")


def follow(driver, element):
    """Click `element` and wait until the page it leads to has replaced this one."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    page = by(driver, "html")
    element.click()

    def replaced(_driver) -> bool:
        try:
            page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            # Chromium, asked mid-navigation, may answer this instead of "stale element": the
            # old page's node is gone all the same (seen under load).
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    WebDriverWait(driver, 20).until(replaced)


def log_in(driver, base, token):
    """Log in afresh (any session of an earlier test dropped first)."""
    driver.get(base + "/console/login")
    driver.delete_all_cookies()
    driver.get(base + "/console/login")
    field = by(driver, "input[name=token]")
    field.clear()
    field.send_keys(token)
    follow(driver, by(driver, "form button[type=submit]"))


def test_the_console_refuses_a_wrong_owner_token_and_an_analysts_token(driver, served):
    for token in ("not-the-owner-token", served["tokens"]["alice"]):
        log_in(driver, served["console"], token)
        assert "not the owner token" in wait_for(driver, ".flash.error").text
        assert driver.current_url.endswith("/console/login") and not driver.get_cookies()
    driver.get(served["console"] + "/console/analysts")
    assert driver.current_url.endswith("/console/login")


def test_the_console_logs_in_and_every_page_is_a_link_away(driver, served):
    chrome.requested(driver)  # drop what came before
    log_in(driver, served["console"], OWNER_TOKEN)
    assert by(driver, "h1").text == "Overview" and by(driver, "svg.bar")
    [cookie] = driver.get_cookies()
    base = urlsplit(driver.current_url).path
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == base != "/console"
    chrome.shot(driver, "console-overview.png")
    for label, title in (("Datasets", "Datasets"), ("Analysts", "Analysts"), ("History", "History"),
                         ("Spending", "Spending"), ("Audit log", "Audit log"), ("Overview", "Overview")):
        follow(driver, driver.find_element("link text", label))
        assert by(driver, "h1").text == title
        if title in ("Analysts", "History", "Spending"):
            chrome.shot(driver, f"console-{title.lower()}.png")
    follow(driver, driver.find_element("link text", "History"))
    from selenium.webdriver.support.ui import Select

    Select(by(driver, "select[name=analyst]")).select_by_visible_text("bob")
    follow(driver, by(driver, ".filters button"))
    assert "analyst=bob" in driver.current_url
    rows = driver.find_elements("css selector", "tbody tr")
    assert rows and all("bob" in row.text for row in rows)
    follow(driver, driver.find_element("partial link text", "older"))
    assert "offset=50" in driver.current_url and "analyst=bob" in driver.current_url
    follow(driver, driver.find_element("link text", "Spending"))
    assert len(driver.find_elements("css selector", "svg.chart path")) >= 2
    assert chrome.foreign(chrome.requested(driver), served["console"]) == []


def test_revoke_and_rotate_through_the_console_forms(driver, served):
    plane, tokens = served["plane"], served["tokens"]
    log_in(driver, served["console"], OWNER_TOKEN)
    follow(driver, driver.find_element("link text", "Analysts"))

    def row(name):
        return next(r for r in driver.find_elements("css selector", "tbody tr")
                    if r.find_element("css selector", "td").text == name)

    follow(driver, row("bob").find_element("xpath", ".//button[text()='Revoke']"))
    assert "Revoked bob" in by(driver, ".flash").text and "revoked" in row("bob").text
    assert authenticate(plane.ledger, tokens["bob"]) is None
    follow(driver, row("bob").find_element("xpath", ".//button[contains(., 'new token')]"))
    new = by(driver, "code.token").text
    assert authenticate(plane.ledger, new) is not None and authenticate(plane.ledger, tokens["bob"]) is None
    tokens["bob"] = new
    follow(driver, driver.find_element("link text", "Back to the analysts"))
    follow(driver, row("alice").find_element("xpath", ".//button[text()='Rotate token']"))
    rotated = by(driver, "code.token").text
    assert authenticate(plane.ledger, rotated) is not None and authenticate(plane.ledger, tokens["alice"]) is None
    tokens["alice"] = rotated


def test_a_cross_site_form_is_refused_even_with_the_csrf_token(driver, served):
    log_in(driver, served["console"], OWNER_TOKEN)
    served["leaked"]["csrf"] = by(driver, "input[name=csrf]").get_attribute("value")
    served["leaked"]["base"] = urlsplit(driver.current_url).path  # the session's key too: only the token is missing
    driver.get(served["other"] + "/")  # 127.0.0.1 on another port: same site, so the cookie goes along
    follow(driver, by(driver, "#go"))
    wait_for(driver, "h1", "Refused")
    assert "another site" in driver.page_source
    assert not next(a for a in served["plane"].analysts() if a["name"] == "carol")["revoked"]


def test_the_analyst_page_pastes_a_token_sees_datasets_quota_and_asks(driver, served):
    from selenium.webdriver.support.ui import Select

    base, token = served["analyst"], served["tokens"]["alice"]
    chrome.requested(driver)
    driver.get(base + "/")
    by(driver, "#token").send_keys("not-a-token")
    by(driver, "#go").click()
    assert "not authenticated" in wait_for(driver, "#status .error").text
    by(driver, "#token").send_keys(token)
    by(driver, "#go").click()
    wait_for(driver, "#who", "alice")
    assert by(driver, "#token").get_attribute("value") == ""
    wait_for(driver, "#datasets td", "payroll")
    assert "none (identify only)" in by(driver, "#datasets").text and "150" in by(driver, "#datasets").text
    assert "20" in by(driver, "#quota").text and len(driver.find_elements("css selector", "#history tr")) > 5
    Select(by(driver, "#x-dataset")).select_by_visible_text("staff")
    by(driver, "#x-keys").send_keys("10, 41")
    by(driver, "#x-verifier").send_keys("grubbs")
    by(driver, "#x-cost").click()
    assert "would charge 0.4 ε" in wait_for(driver, "#x-out .ok").text
    by(driver, "#x-ask").click()
    result = wait_for(driver, "#x-out .result", timeout=90)
    assert "record 10" in result.text and "privacy cost ε = 0.2" in result.text
    wait_for(driver, "#history td", "key = 41")
    driver.find_element("css selector", "#i-value input").send_keys("9000")
    by(driver, "#i-ask").click()
    assert "anomaly:" in wait_for(driver, "#i-out .result", timeout=90).text
    chrome.shot(driver, "analyst-page.png")
    by(driver, "#x-epsilon").clear()
    by(driver, "#x-epsilon").send_keys("900")
    by(driver, "#x-ask").click()
    error = wait_for(driver, "#x-out .error")
    assert "429" in error.text and "nothing was charged" in error.text and "GET /v1/me" in error.text
    assert token not in driver.current_url and not driver.get_cookies()
    assert driver.execute_script("return localStorage.length + sessionStorage.length") == 0
    assert chrome.foreign(chrome.requested(driver), base) == []
    problems = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]
                and "status of 4" not in e["message"]]
    assert problems == []  # no CSP violation, no script error


def test_another_loopback_port_the_owner_visits_gets_no_console_cookie_and_a_replay_opens_nothing(driver, served):
    """Browsers do not isolate cookies by port (DESIGN.md §9): a process on another 127.0.0.1 port
    that the logged-in owner's Chromium visits, at any path it likes, is sent no `pcor_console`;
    and even the cookie's value, replayed to the console without its session's path key, opens
    no page and passes no form (CSRF token included)."""
    console, other = served["console"], served["other"]
    log_in(driver, console, OWNER_TOKEN)
    base = urlsplit(driver.current_url).path
    assert re.fullmatch(r"/console/[A-Za-z0-9_-]{32}", base) and by(driver, "h1").text == "Overview"
    csrf = by(driver, "input[name=csrf]").get_attribute("value")
    [cookie] = driver.get_cookies()
    served["cookies"].clear()
    guesses = ("/", "/console", "/console/login", "/console/analysts", f"/console/{secrets.token_urlsafe(24)}/analysts",
               "/console/" + base.rsplit("/", 1)[1][:-1] + "x")
    for path in guesses:
        driver.get(other + path)
        if path == "/":
            continue
        try:  # under load Chromium has returned from get() with the page still empty: wait for it
            wait_for(driver, "p", "hello", timeout=15)
        except AssertionError:  # once more (each visit is one more request the cookie check below reads)
            driver.get(other + path)
            wait_for(driver, "p", "hello", timeout=15)
    received = [(path, header) for path, header in served["cookies"]]
    assert len(received) >= len(guesses) and not [r for r in received if "pcor_console" in r[1]], received

    jar = {"pcor_console": cookie["value"]}  # a replay: the cookie's value itself, however it was had
    with httpx.Client(base_url=console, cookies=jar, follow_redirects=False, timeout=30) as replay:
        for path in ("/console", "/console/analysts", "/console/history", f"/console/{secrets.token_urlsafe(24)}",
                     f"/console/{secrets.token_urlsafe(24)}/analysts", "/console/" + base[len("/console/"):].upper()):
            r = replay.get(path)
            assert r.status_code == 303 and r.headers["location"] == "/console/login", path
        for path in (f"/console/{secrets.token_urlsafe(24)}/analysts/revoke", "/console/analysts/revoke"):
            r = replay.post(path, data={"name": "carol", "csrf": csrf})
            assert r.status_code in (403, 404), (path, r.status_code)
    assert not next(a for a in served["plane"].analysts() if a["name"] == "carol")["revoked"]
    with httpx.Client(base_url=console, follow_redirects=False, timeout=30) as keyless:  # the path without the cookie
        assert keyless.get(base + "/analysts").headers.get("location") == "/console/login"
    with httpx.Client(base_url=console, cookies=jar, follow_redirects=False, timeout=30) as owner:
        assert owner.get(base + "/analysts").status_code == 200  # both together: the owner's own session
