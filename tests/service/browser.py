"""Headless Chromium for the browser tests (selenium, the Debian chromium and chromium-driver
packages): one browser per test module, every request it makes recorded (Chrome's performance
log), so a test can check that a page loaded nothing from another origin.

The driver is named by path so selenium's manager never tries the network. Tests skip, saying
why, only when chromium or its driver is absent (CI installs them: `.ci/run`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = os.environ.get("PCOR_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.environ.get("PCOR_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Where the tests save their screenshots when set (the README's come from here: docs/img).
SHOTS = os.environ.get("PCOR_SCREENSHOTS")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None. Never a reason where CI says they must
    run (PCOR_BROWSER_TESTS=required, set by `.ci/run` once Chromium is installed)."""
    if os.environ.get("PCOR_BROWSER_TESTS") == "required":
        return None
    for path in (CHROMIUM, DRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    return None


def browser() -> Iterator[Any]:
    """A headless Chromium at 1280×900 that records its network requests (a fixture's body)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    try:
        import selenium  # noqa: F401  (the `test` extra has it)
    except ImportError:
        if os.environ.get("PCOR_BROWSER_TESTS") == "required":
            raise
        pytest.skip("selenium is not installed (pip install selenium, or the `test` extra)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--force-device-scale-factor=1", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--lang=en-US"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(30)
    # The viewport itself 1280×900 (a window of that size has a smaller one, even headless).
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        yield driver
    finally:
        driver.quit()


def requested(driver: Any) -> list[str]:
    """Every URL the page's renderer asked for since the last call (documents, scripts, styles,
    images, fonts, fetches), from Chrome's performance log."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def foreign(urls: list[str], *origins: str) -> list[str]:
    """The URLs not on one of `origins` (data: and about: URLs are the page's own)."""
    return [u for u in urls if not u.startswith(tuple(o + "/" for o in origins)) and not u.startswith(("data:", "about:"))]


def shot(driver: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / name))
