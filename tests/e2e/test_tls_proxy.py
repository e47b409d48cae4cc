"""The admin login and the dashboard socket behind a TLS-terminating reverse proxy.

Real gateway processes, reached through ``tests/e2e/forwarding_proxy.py``: it tells the gateway
``X-Forwarded-Proto: https``, and the client, playing the browser on
``https://gateway.example``, sends that ``Origin``. The three gateways differ only in
``OMNIROUTE_SECURE_PROXY_SSL_HEADER`` and ``OMNIROUTE_CSRF_TRUSTED_ORIGINS``
(docs/deploying.md, "Behind a TLS proxy").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import pytest

from tests.e2e.conftest import Gateway, prepare_gateway, serving
from tests.e2e.dashboard_support import ADMIN_PASSWORD, ADMIN_USER, create_admin
from tests.e2e.forwarding_proxy import forwarding_proxy

pytestmark = pytest.mark.e2e

PUBLIC_HOST = "gateway.example"
PUBLIC_ORIGIN = f"https://{PUBLIC_HOST}"
PROXY_HEADER = {"OMNIROUTE_SECURE_PROXY_SSL_HEADER": "true"}
TRUSTED = {"OMNIROUTE_CSRF_TRUSTED_ORIGINS": PUBLIC_ORIGIN}
RECEIVE_SECONDS = 10


@dataclass
class Gateways:
    plain: Gateway  # neither setting
    proxy_header: Gateway  # OMNIROUTE_SECURE_PROXY_SSL_HEADER only
    both: Gateway  # and OMNIROUTE_CSRF_TRUSTED_ORIGINS


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    """Three processes on one database (one admin user), each with its own settings."""
    hosts = {"ALLOWED_HOSTS": f"{PUBLIC_HOST},127.0.0.1"}
    env, key = prepare_gateway(tmp_path_factory.mktemp("tls-proxy"), **hosts)
    create_admin(env)
    with (
        serving(env, key) as plain,
        serving({**env, **PROXY_HEADER}, key) as proxy_header,
        serving({**env, **PROXY_HEADER, **TRUSTED}, key) as both,
    ):
        yield Gateways(plain, proxy_header, both)


@pytest.fixture
async def browser() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that keeps no cookies of its own: each test sends and reads them itself."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


@dataclass
class Login:
    status: int
    cookies: SimpleCookie  # every cookie the login page and the login set

    def secure(self) -> dict[str, bool]:
        return {name: bool(morsel["secure"]) for name, morsel in self.cookies.items()}


async def log_in(browser: aiohttp.ClientSession, url: str, host: str, origin: str) -> Login:
    """The admin's login as a browser on ``origin`` does it: the page for the CSRF token, then
    the form with ``Origin`` and ``Referer``."""
    cookies: SimpleCookie = SimpleCookie()
    async with browser.get(f"{url}/admin/login/", headers={"Host": host}) as page:
        assert page.status == 200, await page.text()
        _keep(cookies, page)
    token = cookies["csrftoken"].value
    form = {"username": ADMIN_USER, "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": token}
    headers = {
        "Host": host,
        "Origin": origin,
        "Referer": f"{origin}/admin/login/",
        "Cookie": f"csrftoken={token}",
    }
    async with browser.post(
        f"{url}/admin/login/?next=/admin/", data=form, headers=headers, allow_redirects=False
    ) as login:
        _keep(cookies, login)
        return Login(login.status, cookies)


def _keep(cookies: SimpleCookie, response: aiohttp.ClientResponse) -> None:
    for header in response.headers.getall("Set-Cookie", []):
        cookies.load(header)


async def open_dashboard(
    browser: aiohttp.ClientSession, url: str, session_id: str
) -> dict[str, Any] | int:
    """The dashboard socket's first message, or the status that refused the handshake."""
    headers = {"Host": PUBLIC_HOST, "Origin": PUBLIC_ORIGIN, "Cookie": f"sessionid={session_id}"}
    try:
        socket = await browser.ws_connect(
            f"ws{url.removeprefix('http')}/ws/dashboard/", headers=headers
        )
    except aiohttp.WSServerHandshakeError as refused:
        return refused.status
    async with socket:
        first: dict[str, Any] = await socket.receive_json(timeout=RECEIVE_SECONDS)
        return first


async def direct_session(browser: aiohttp.ClientSession, gateway: Gateway) -> str:
    """A logged-in session, got over plain http straight from the gateway (its own origin)."""
    host = gateway.url.removeprefix("http://")
    login = await log_in(browser, gateway.url, host, gateway.url)
    assert login.status == 302
    return login.cookies["sessionid"].value


async def test_with_both_settings_login_and_socket_work_and_the_cookies_are_secure(
    gateways: Gateways, browser: aiohttp.ClientSession
) -> None:
    # nginx's default: the gateway sees its own address as the host, so only the trusted
    # origin matches the browser's.
    async with forwarding_proxy(gateways.both.url, pass_host=False) as proxy:
        login = await log_in(browser, proxy, PUBLIC_HOST, PUBLIC_ORIGIN)
        assert login.status == 302
        assert login.secure() == {"csrftoken": True, "sessionid": True}

        dashboard = await open_dashboard(browser, proxy, login.cookies["sessionid"].value)
        assert isinstance(dashboard, dict) and dashboard["type"] == "snapshot"


async def test_without_the_trusted_origin_login_and_socket_are_refused(
    gateways: Gateways, browser: aiohttp.ClientSession
) -> None:
    session_id = await direct_session(browser, gateways.proxy_header)
    async with forwarding_proxy(gateways.proxy_header.url, pass_host=False) as proxy:
        login = await log_in(browser, proxy, PUBLIC_HOST, PUBLIC_ORIGIN)
        assert login.status == 403
        assert "sessionid" not in login.cookies
        assert await open_dashboard(browser, proxy, session_id) == 403


async def test_a_proxy_that_passes_the_host_needs_only_the_proxy_header(
    gateways: Gateways, browser: aiohttp.ClientSession
) -> None:
    async with forwarding_proxy(gateways.proxy_header.url, pass_host=True) as proxy:
        login = await log_in(browser, proxy, PUBLIC_HOST, PUBLIC_ORIGIN)
        assert login.status == 302
        assert login.secure() == {"csrftoken": True, "sessionid": True}

        dashboard = await open_dashboard(browser, proxy, login.cookies["sessionid"].value)
        assert isinstance(dashboard, dict) and dashboard["type"] == "snapshot"


async def test_without_the_proxy_header_setting_the_forwarded_https_is_not_believed(
    gateways: Gateways, browser: aiohttp.ClientSession
) -> None:
    # The proxy sends X-Forwarded-For and X-Forwarded-Proto: neither Django nor the server
    # takes the scheme from them, so the browser's https origin is not the request's own.
    session_id = await direct_session(browser, gateways.plain)
    async with forwarding_proxy(gateways.plain.url, pass_host=True) as proxy:
        login = await log_in(browser, proxy, PUBLIC_HOST, PUBLIC_ORIGIN)
        assert login.status == 403
        assert await open_dashboard(browser, proxy, session_id) == 403


async def test_over_plain_http_the_cookies_stay_plain(
    gateways: Gateways, browser: aiohttp.ClientSession
) -> None:
    host = gateways.both.url.removeprefix("http://")
    login = await log_in(browser, gateways.both.url, host, gateways.both.url)
    assert login.status == 302
    assert login.secure() == {"csrftoken": False, "sessionid": False}
