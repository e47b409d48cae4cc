"""What the dashboard's end-to-end tests share: an admin user, a logged-in session, and a
provider whose breaker two requests open."""

from __future__ import annotations

import httpx
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, manage

ADMIN_USER, ADMIN_PASSWORD = "operator", "dashboard-e2e-password"
FAST_LOCAL = {"failureThreshold": 2, "degradationThreshold": 1, "resetTimeoutMs": 60_000}
MESSAGES = [{"role": "user", "content": "x"}]


def create_admin(env: dict[str, str]) -> None:
    manage(
        "createsuperuser",
        "--noinput",
        "--username",
        ADMIN_USER,
        "--email",
        "op@example.com",
        env={**env, "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
    )


def admin_session(gateway: Gateway) -> str:
    """Log in through the admin's form, as a browser does; the session cookie's value."""
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        client.get("/admin/login/")
        form = {
            "username": ADMIN_USER,
            "password": ADMIN_PASSWORD,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        }
        referer = {"referer": f"{gateway.url}/admin/login/"}
        response = client.post("/admin/login/?next=/admin/", data=form, headers=referer)
        assert response.status_code == 302, response.text
        return str(client.cookies["sessionid"])


def log_in(chrome: webdriver.Chrome, gateway: Gateway, wait_seconds: float = 15) -> None:
    """Log the browser in through the admin's form, as the operator."""
    chrome.get(f"{gateway.url}/admin/login/")
    chrome.find_element(By.NAME, "username").send_keys(ADMIN_USER)
    chrome.find_element(By.NAME, "password").send_keys(ADMIN_PASSWORD)
    chrome.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(chrome, wait_seconds).until(lambda c: "/admin/login/" not in c.current_url)


def failing_route(gateway: Gateway, fake: FakeUpstream) -> Route:
    """A ``local`` provider whose two connections answer 503, its breaker opening at the second
    counted failure (no retries, no cooling; see tests/e2e/test_breaker.py for why two)."""
    fast = {"providerBreaker": {"local": FAST_LOCAL}, "attempts": {"retriesPerTarget": 0}}
    patch = gateway.api.patch("/api/resilience", json=fast)
    assert patch.status_code == 200, patch.text
    down = {"status": 503}
    return make_route(gateway, fake, down, down, category="local", disable_cooling=True)


def open_breaker(gateway: Gateway, route: Route) -> list[str]:
    """Two failing requests open the route's breaker; their request ids."""
    ids = []
    with gateway.client(route.key) as client:
        for _ in range(2):
            body = {"model": route.model(), "messages": MESSAGES}
            answer = client.post("/chat/completions", json=body)
            assert answer.status_code == 503
            ids.append(answer.headers["x-omniroute-request-id"])
    return ids
