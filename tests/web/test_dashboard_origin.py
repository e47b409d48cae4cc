"""Which handshakes the dashboard socket accepts: its own origin (scheme, host and port) or a
trusted one; the scheme from X-Forwarded-Proto only with ``SECURE_PROXY_SSL_HEADER`` set.

Accepted and refused sockets end to end, through a reverse proxy, are in
``tests/e2e/test_tls_proxy.py``; the denial at the ASGI level in ``test_dashboard.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pytest_django.fixtures import Settings

from omniroute.dashboard.origin import handshake_allowed, own_origin

PROXY_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


def handshake(*, origin: str | None, host: str | None = "testserver", **extra: str) -> Any:
    headers = [(b"origin", origin), (b"host", host), *((k.encode(), v) for k, v in extra.items())]
    return {
        "type": "websocket",
        "headers": [(name, value.encode()) for name, value in headers if value is not None],
    }


def test_the_same_origin_port_included() -> None:
    assert handshake_allowed(handshake(origin="http://testserver"))
    assert handshake_allowed(handshake(origin="http://testserver:8000", host="testserver:8000"))
    assert not handshake_allowed(handshake(origin="http://testserver", host="testserver:8000"))
    assert not handshake_allowed(handshake(origin="http://testserver:8000"))
    assert not handshake_allowed(handshake(origin="https://testserver"))


def test_no_origin_another_origin_or_a_host_not_served_is_refused() -> None:
    assert not handshake_allowed(handshake(origin=None))
    assert not handshake_allowed(handshake(origin="http://evil.example"))
    assert not handshake_allowed(handshake(origin="http://evil.example", host="evil.example"))
    assert own_origin(handshake(origin=None, host="evil.example")) is None
    assert own_origin(handshake(origin=None, host=None)) is None


def test_the_forwarded_scheme_counts_only_with_the_proxy_header_setting(
    settings: Settings,
) -> None:
    behind_tls = handshake(origin="https://testserver", **{"x-forwarded-proto": "https"})
    assert not handshake_allowed(behind_tls)
    settings.SECURE_PROXY_SSL_HEADER = PROXY_HEADER
    assert handshake_allowed(behind_tls)
    plain = handshake(origin="https://testserver", **{"x-forwarded-proto": "http"})
    assert not handshake_allowed(plain)
    listed = handshake(origin="https://testserver", **{"x-forwarded-proto": "https, http"})
    assert handshake_allowed(listed)
    # Without the header the connection's own scheme stands.
    assert own_origin(handshake(origin=None)) == "http://testserver"
    assert own_origin({**handshake(origin=None), "scheme": "wss"}) == "https://testserver"


def test_a_trusted_origin_is_accepted_whatever_the_host(settings: Settings) -> None:
    proxied = handshake(origin="https://gateway.example", host="127.0.0.1:8000")
    assert not handshake_allowed(proxied)
    settings.CSRF_TRUSTED_ORIGINS = ["https://gateway.example"]
    assert handshake_allowed(proxied)
    assert not handshake_allowed(handshake(origin="https://other.example"))


@pytest.mark.parametrize("host", ["testserver", "TestServer"])
def test_the_host_is_checked_like_django_checks_it(host: str) -> None:
    assert own_origin(handshake(origin=None, host=host)) == f"http://{host}"
