"""The admin in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) against a gateway process.

The connection list must be styled (a computed style, not just a 200 for the stylesheet), and
the live dashboard must show a breaker turning open without a reload. Screenshots are kept in
``test-artifacts/`` (``OMNIROUTE_TEST_ARTIFACTS`` moves it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from routing.fakeupstream import FakeUpstream
from tests.conftest import require_service
from tests.e2e.conftest import ROOT, Gateway, prepare_gateway, serving
from tests.e2e.dashboard_support import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    create_admin,
    failing_route,
    open_breaker,
)

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(os.environ.get("OMNIROUTE_TEST_ARTIFACTS", ROOT / "test-artifacts"))
WAIT_SECONDS = 15
# The admin's header colour (--header-bg, from admin/css/base.css); unstyled it is transparent.
ADMIN_HEADER_BACKGROUND = "rgba(65, 118, 144, 1)"
CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
)  # fmt: skip


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        require_service("Chromium", FileNotFoundError("chromium or chromedriver (make browser)"))
    assert binary is not None and driver is not None
    options = Options()
    options.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def own_gateway(tmp_path: Path) -> Iterator[tuple[Gateway, dict[str, str]]]:
    # Its own process: the breaker settings it changes are nobody else's.
    env, manage_key = prepare_gateway(tmp_path / "gateway")
    create_admin(env)
    with serving(env, manage_key) as gateway:
        yield gateway, env


def _screenshot(chrome: webdriver.Chrome, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert chrome.save_screenshot(str(ARTIFACTS / name))


def _log_in(chrome: webdriver.Chrome, gateway: Gateway) -> None:
    chrome.get(f"{gateway.url}/admin/login/")
    chrome.find_element(By.NAME, "username").send_keys(ADMIN_USER)
    chrome.find_element(By.NAME, "password").send_keys(ADMIN_PASSWORD)
    chrome.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(chrome, WAIT_SECONDS).until(lambda c: "/admin/login/" not in c.current_url)


def test_the_connection_list_is_styled_and_the_dashboard_shows_a_breaker_opening_live(
    browser: webdriver.Chrome, own_gateway: tuple[Gateway, dict[str, str]], fake: FakeUpstream
) -> None:
    gateway, _ = own_gateway
    route = failing_route(gateway, fake)
    _log_in(browser, gateway)

    browser.get(f"{gateway.url}/admin/routing/providerconnection/")
    header = browser.find_element(By.ID, "header")
    assert header.value_of_css_property("background-color") == ADMIN_HEADER_BACKGROUND
    assert browser.find_element(By.ID, "result_list").is_displayed()
    assert route.provider in browser.find_element(By.ID, "result_list").text
    _screenshot(browser, "admin-connection-list.png")

    browser.get(f"{gateway.url}/admin/dashboard/")
    wait = WebDriverWait(browser, WAIT_SECONDS)
    wait.until(
        lambda c: c.find_element(By.ID, "socket-state").get_attribute("data-state") == "open"
    )
    browser.execute_script("window.loadedOnce = true;")
    assert not browser.find_elements(By.CSS_SELECTOR, f'#breakers tr[data-key="{route.provider}"]')
    _screenshot(browser, "dashboard-before.png")

    open_breaker(gateway, route)
    state = f'#breakers tr[data-key="{route.provider}"] td.state'
    wait.until(lambda c: [e.text for e in c.find_elements(By.CSS_SELECTOR, state)] == ["open"])
    assert browser.execute_script("return window.loadedOnce") is True  # the same page
    events = browser.find_elements(By.CSS_SELECTOR, '#events li[data-kind="breaker"]')
    assert any(route.provider in e.text and "open" in e.text for e in events)
    _screenshot(browser, "dashboard-breaker-open.png")
