"""How long a client may take to send its request: ``BODY_TIMEOUT_SECONDS`` without a byte
while its request line, headers or body are still coming, and the gateway answers 408 in JSON
(in Anthropic's shape on ``/v1/messages…``, the OpenAI shape elsewhere) and closes the
connection; an idle keep-alive connection is closed after as long, with no answer.

daphne hands a request to the application only once its whole body has arrived, so this bound
lives on its HTTP connection (Twisted's idle timeout, which is paused while the application
answers): left at its default of 12 hours, a client that trickled or stopped its body would
hold a connection, and the body buffered so far, that long.

uvicorn hands the request over once its headers are in and the body follows through
``receive``: there :class:`BodyTimeout` bounds each wait for the next part of the body, and
uvicorn's own keep-alive timeout closes idle connections. uvicorn has no bound on a request line
or headers that stop arriving.
"""

from __future__ import annotations

import asyncio
from typing import Any

from omniroute.core.errors import error_body
from routing.domain.client.errors import anthropic_error_body

__all__ = ["STATUS", "BodyTimeout", "bound_request_time", "timeout_body", "timeout_response"]

STATUS = 408
MESSAGES_PREFIX = "/v1/messages"


def timeout_body(path: str, seconds: float) -> bytes:
    """The 408's JSON body, in the shape the path's clients read."""
    message = f"The request did not arrive: nothing was received for {seconds:g} s."
    body = error_body(message, "invalid_request_error", "request_timeout")
    if path.startswith(MESSAGES_PREFIX):
        return anthropic_error_body(STATUS, body)
    return body


def timeout_response(path: str, seconds: float) -> bytes:
    """The whole HTTP/1.1 408 answer, written straight to the connection."""
    body = timeout_body(path, seconds)
    head = (
        f"HTTP/1.1 {STATUS} Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def bound_request_time(protocol: Any, seconds: float) -> None:
    """Give a connection daphne's factory built (Twisted's HTTP channel, or its TLS-negotiating
    wrapper) the request timeout, answering 408 when it ends a request that had begun."""
    protocol.timeOut = seconds
    channel = getattr(protocol, "_channel", protocol)
    close = channel.timeoutConnection

    def timeout_connection() -> None:
        command, path = getattr(channel, "_command", None), getattr(channel, "_path", b"")
        if command is not None and channel.transport is not None:  # a request had begun
            channel.transport.write(timeout_response(path.decode("latin-1"), seconds))
        close()

    channel.timeoutConnection = timeout_connection


class BodyTimeout:
    """ASGI middleware: a request whose body sends nothing for ``seconds`` gets the 408, and the
    application an ``http.disconnect`` (it gives up on the request; anything it sends after is
    dropped). Waits after the body was received whole (for a disconnect) are not bounded."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = answered = timed_out = False

        async def timed_receive() -> dict[str, Any]:
            nonlocal body_done, timed_out
            if body_done or timed_out:
                return dict(await receive())
            try:
                async with asyncio.timeout(self.seconds):
                    message = dict(await receive())
            except TimeoutError:
                timed_out = True
                if not answered:
                    await send_timeout(send, scope["path"], self.seconds)
                return {"type": "http.disconnect"}
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal answered
            if timed_out:
                return
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, timed_receive, tracking_send)


async def send_timeout(send: Any, path: str, seconds: float) -> None:
    """The 408 through ASGI, closing the connection after it."""
    body = timeout_body(path, seconds)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": STATUS, "headers": headers})
    await send({"type": "http.response.body", "body": body})
