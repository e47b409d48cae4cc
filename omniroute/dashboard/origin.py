"""Which pages may open the dashboard's WebSocket: the rule of the admin's own forms.

A browser sends its page's ``Origin`` with every WebSocket handshake and the admin session's
cookie with it, so without this check any site the operator visits could read the dashboard.
The socket is accepted when the ``Origin`` equals the request's own origin or is listed in
``OMNIROUTE_CSRF_TRUSTED_ORIGINS`` (:func:`omniroute.core.origins.origin_accepted`, the rule
Django's CSRF check applies to the admin's logins and forms). The request's own origin is
``scheme://Host``: the scheme is https when ``OMNIROUTE_SECURE_PROXY_SSL_HEADER`` is on and the
proxy's ``X-Forwarded-Proto`` says so (else that of the connection), the ``Host`` header must
name a host in ``ALLOWED_HOSTS`` and keeps its port. A refused handshake is answered 403.
"""

from __future__ import annotations

from typing import Any

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from omniroute.core.origins import origin_accepted

__all__ = ["OriginValidator", "own_origin"]

Scope = dict[str, Any]


class OriginValidator:
    """ASGI middleware: a WebSocket whose ``Origin`` fails the rule above is denied."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not handshake_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def handshake_allowed(scope: Scope) -> bool:
    """Whether the handshake's ``Origin`` is its own origin or a trusted one (none: refused)."""
    origin = _header(scope, b"origin")
    if origin is None:
        return False
    return origin_accepted(
        origin, own_origin=own_origin(scope), trusted=settings.CSRF_TRUSTED_ORIGINS
    )


def own_origin(scope: Scope) -> str | None:
    """``scheme://host[:port]`` of the request, as Django's ``request.is_secure()`` and
    ``get_host()`` see it; None without a ``Host`` the gateway serves."""
    host = _header(scope, b"host")
    if host is None:
        return None
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return f"{_scheme(scope)}://{host}"


def _scheme(scope: Scope) -> str:
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header is not None:
        meta_name, secure_value = proxy_header  # "HTTP_X_FORWARDED_PROTO", "https"
        name = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        value = _header(scope, name)
        if value is not None:  # the first of a list, as Django reads it
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") == "wss" else "http"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
