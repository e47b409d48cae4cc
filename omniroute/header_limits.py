"""Header limits for every HTTP request: too many headers, or too many bytes of them, get a
JSON 431 (in Anthropic's shape on ``/v1/messages…``, the OpenAI shape elsewhere).

daphne's HTTP parser has its own, higher limits, and past them the application never sees the
request: a header line over 16 KiB closes the connection without an answer, and more than
500 headers or 16 KiB of them in all get an empty 400 (docs/deploying.md). Below those, these
limits answer in JSON, before any consumer or view reads the request.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from omniroute.core.errors import error_body
from routing.domain.client.errors import anthropic_error_body

__all__ = ["MAX_HEADERS", "MAX_HEADER_BYTES", "HeaderLimits"]

MAX_HEADERS = 100
MAX_HEADER_BYTES = 8 * 1024  # names and values together
STATUS = 431
MESSAGES_PREFIX = "/v1/messages"

Scope = dict[str, Any]


class HeaderLimits:
    """ASGI middleware: an HTTP request over the header limits is answered 431 here."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if scope["type"] == "http" and headers_exceed(scope["headers"]):
            return await _refuse(scope, send)
        return await self.application(scope, receive, send)


def headers_exceed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether ``headers`` are more than :data:`MAX_HEADERS` or :data:`MAX_HEADER_BYTES`."""
    if len(headers) > MAX_HEADERS:
        return True
    return sum(map(len, chain.from_iterable(headers))) > MAX_HEADER_BYTES  # names and values


def refusal_body(path: str) -> bytes:
    """The 431's JSON body, in the shape the path's clients read."""
    message = (
        f"The request's headers exceed the gateway's limits ({MAX_HEADERS} headers, "
        f"{MAX_HEADER_BYTES} bytes)."
    )
    body = error_body(message, "invalid_request_error", "request_header_fields_too_large")
    if path.startswith(MESSAGES_PREFIX):
        return anthropic_error_body(STATUS, body)
    return body


async def _refuse(scope: Scope, send: Any) -> None:
    body = refusal_body(scope.get("path", ""))
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": STATUS, "headers": headers})
    await send({"type": "http.response.body", "body": body})
