"""The analyst page in headless Chromium (DESIGN.md §9 "The analyst page"): the releasable keys of
a dataset, public by registration, listed a page at a time; and what the identify box asks for."""

from __future__ import annotations

import pytest

import pcor_sql.service
from tests.service import browser as chrome
from tests.service.console_fixture import make_owner
from tests.service.live_server import live_server
from tests.service.test_console_browser import by, wait_for

pytestmark = pytest.mark.skipif(chrome.missing() is not None, reason=chrome.missing() or "")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    owner, tokens = make_owner(str(tmp_path_factory.mktemp("keys") / "ledger.duckdb"))
    with live_server(pcor_sql.service.app(owner, workers=2, warm=False, processes=False), start_timeout=120) as url:
        yield url, tokens


@pytest.fixture(scope="module")
def driver(served):
    yield from chrome.browser()


def signed_in(driver, served):
    url, tokens = served
    driver.get(url + "/")
    by(driver, "#token").send_keys(tokens["alice"])
    by(driver, "#go").click()
    wait_for(driver, "#datasets td", "payroll")


def test_the_page_lists_the_releasable_keys_a_page_at_a_time(driver, served):
    from selenium.webdriver.support.ui import Select

    signed_in(driver, served)
    Select(by(driver, "#r-dataset")).select_by_visible_text("staff")
    by(driver, "#r-show").click()
    first = wait_for(driver, "#r-out .mono")
    assert "150 releasable keys of staff; 1–100 shown" in by(driver, "#r-out").text
    assert first.text.startswith("0, 1, 10, 100, 101")  # the frozen (sorted) order, as JSON integers
    by(driver, "#r-next").click()
    wait_for(driver, "#r-out", "101–150 shown")
    Select(by(driver, "#r-dataset")).select_by_visible_text("payroll")
    by(driver, "#r-show").click()
    wait_for(driver, "#r-out", "declared no releasable keys for payroll")
    chrome.shot(driver, "analyst-page-keys.png")


def test_the_identify_box_says_what_the_value_is(driver, served):
    from selenium.webdriver.support.ui import Select

    signed_in(driver, served)
    Select(by(driver, "#i-dataset")).select_by_visible_text("staff")
    label = wait_for(driver, "#i-value label", "value of pay to test")
    assert "point of pay" in by(driver, "#i-value input").get_attribute("title")
    assert label.text.startswith("value of pay to test")
