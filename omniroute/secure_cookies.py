"""Cookies set over https are marked ``Secure``, so a browser never sends them over plain http.

Django's ``SESSION_COOKIE_SECURE`` and ``CSRF_COOKIE_SECURE`` are fixed for every request, and
neither value suits both ways the gateway is reached: on for all would make a browser drop the
cookies of a plain-http gateway on its own host (the admin login would never stick), off for
all would let the cookies of an https deployment travel in the clear. This middleware decides
per request instead, by ``request.is_secure()``: the connection's own scheme, or behind a
TLS-terminating proxy the one ``OMNIROUTE_SECURE_PROXY_SSL_HEADER`` lets the proxy report
(docs/deploying.md, "Behind a TLS proxy").
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

__all__ = ["SecureCookiesMiddleware"]


class SecureCookiesMiddleware(MiddlewareMixin):
    """Marks every cookie a response over https sets (session, CSRF, messages) ``Secure``."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if request.is_secure():
            for cookie in response.cookies.values():
                cookie["secure"] = True
        return response
