"""The admin in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) against a gateway process.

The connection list must be styled (a computed style, not just a 200 for the stylesheet), and
the live dashboard must show a breaker turning open without a reload (its event linking to the
request that opened it in the request log), and count a request that failed over within two
seconds of its answer. Screenshots are kept in ``test-artifacts/``
(``OMNIROUTE_TEST_ARTIFACTS`` moves it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import ARTIFACTS, Gateway, make_route, prepare_gateway, records, serving
from tests.e2e.dashboard_support import (
    MESSAGES,
    create_admin,
    failing_route,
    log_in,
    open_breaker,
)

pytestmark = pytest.mark.e2e

WAIT_SECONDS = 15
SHOWN_WITHIN_SECONDS = 2.0  # from the client's answer to the dashboard showing the request
POLL_SECONDS = 0.05
# The admin's header colour (--header-bg, from admin/css/base.css); unstyled it is transparent.
ADMIN_HEADER_BACKGROUND = "rgba(65, 118, 144, 1)"


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


def test_the_connection_list_is_styled_and_the_dashboard_shows_a_breaker_opening_live(
    browser: webdriver.Chrome, own_gateway: tuple[Gateway, dict[str, str]], fake: FakeUpstream
) -> None:
    gateway, _ = own_gateway
    route = failing_route(gateway, fake)
    log_in(browser, gateway)

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

    requests = open_breaker(gateway, route)
    state = f'#breakers tr[data-key="{route.provider}"] td.state'
    wait.until(lambda c: [e.text for e in c.find_elements(By.CSS_SELECTOR, state)] == ["open"])
    assert browser.execute_script("return window.loadedOnce") is True  # the same page
    events = browser.find_elements(By.CSS_SELECTOR, '#events li[data-kind="breaker"]')
    [opened] = [e for e in events if route.provider in e.text and "open" in e.text]
    _screenshot(browser, "dashboard-breaker-open.png")

    # the event links to the request that opened the breaker, in the request log
    link = opened.find_element(By.CSS_SELECTOR, "a.request-link")
    assert link.text == f"request {requests[-1]}"
    target = str(link.get_attribute("href"))
    wait.until(lambda c: _opened(c, target) and "/change/" in c.current_url)  # once written
    assert requests[-1] in browser.find_element(By.ID, "content").text


def _opened(chrome: webdriver.Chrome, url: str) -> bool:
    chrome.get(url)
    return True


def _figure(chrome: webdriver.Chrome, name: str) -> str:
    return str(chrome.find_element(By.ID, name).text)


def test_the_dashboard_counts_a_request_that_failed_over_within_two_seconds(
    browser: webdriver.Chrome, own_gateway: tuple[Gateway, dict[str, str]], fake: FakeUpstream
) -> None:
    gateway, _ = own_gateway
    route = make_route(gateway, fake, {"status": 503}, {})  # the first connection answers 503
    log_in(browser, gateway)
    browser.get(f"{gateway.url}/admin/dashboard/")
    wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=POLL_SECONDS)
    wait.until(
        lambda c: c.find_element(By.ID, "socket-state").get_attribute("data-state") == "open"
    )
    # The harness's start-up probe (GET /v1/models) is a request too: idle once it has left
    # the window.
    wait.until(lambda c: _figure(c, "processes") == "idle")
    assert (_figure(browser, "requests"), _figure(browser, "failovers")) == ("0", "0")

    with gateway.client(route.key) as client:
        answer = client.post(
            "/chat/completions", json={"model": route.model(), "messages": MESSAGES}
        )
    answered = time.monotonic()
    assert answer.status_code == 200, answer.text
    assert f"connection={route.connections[1]}" in answer.headers["x-omniroute-decision"]
    assert records(fake, route, 1) and records(fake, route, 2)  # both targets were asked

    left = SHOWN_WITHIN_SECONDS - (time.monotonic() - answered)
    shown = WebDriverWait(browser, left, poll_frequency=POLL_SECONDS)
    shown.until(lambda c: (_figure(c, "requests"), _figure(c, "failovers")) == ("1", "1"))
    assert time.monotonic() - answered <= SHOWN_WITHIN_SECONDS
    assert _figure(browser, "rps") == "0.1"  # one request over the ten-second window
    assert _figure(browser, "processes") == "1"
    _screenshot(browser, "dashboard-failover-counted.png")
