"""The one outbound seam: one pooled httpx transport per event loop.

In production requests run on ``httpx-aiohttp``'s transport (aiohttp's connection pool is
several times cheaper per request than httpx's own at concurrency); tests pass their own
transport, typically ``httpx.MockTransport``. Every request has explicit timeouts. Nothing of
the client's request headers is copied: upstream headers are built here from the connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import httpx
from django.conf import settings
from httpx_aiohttp import AiohttpTransport

from routing.domain.outcomes import Outcome, OutcomeKind
from routing.domain.planning import Target
from routing.domain.vocabulary import WireFormat

ERROR_BODY_LIMIT_BYTES = 64 * 1024
RELAYED_ERROR_HEADERS = ("retry-after", "x-ratelimit-reset", "x-ratelimit-remaining-requests")
USER_AGENT = "OmniRoute/0.1"


def default_timeout() -> dict[str, float]:
    """Explicit connect/read/write/pool timeouts from settings, as httpx's request extension."""
    connect = settings.UPSTREAM_CONNECT_TIMEOUT_SECONDS
    read = settings.UPSTREAM_READ_TIMEOUT_SECONDS
    return {"connect": connect, "read": read, "write": 30.0, "pool": connect}


def build_transport(proxy_url: str = "") -> httpx.AsyncBaseTransport:
    """The pooled production transport: aiohttp's connection pool under httpx's interface,
    through the connection's outbound proxy when it has one."""
    limits = httpx.Limits(max_connections=settings.UPSTREAM_MAX_CONNECTIONS)
    proxy = httpx.Proxy(proxy_url) if proxy_url else None
    return AiohttpTransport(limits=limits, trust_env=False, proxy=proxy)


@dataclass(slots=True)
class UpstreamReply:
    """A successful upstream answer, not yet relayed: the whole body, or a stream."""

    status: int
    content_type: str
    body: bytes
    response: httpx.Response | None = None
    chunks: AsyncIterator[bytes] | None = None

    async def aclose(self) -> None:
        if self.response is not None:
            await self.response.aclose()


def _upstream_headers(target: Target, stream: bool) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream" if stream else "application/json",
        "accept-encoding": "identity",
        "user-agent": USER_AGENT,
    }
    secret = target.connection.secret
    if secret and target.provider.wire_format == WireFormat.ANTHROPIC:
        headers["x-api-key"] = secret
        headers["anthropic-version"] = "2023-06-01"
    elif secret:
        headers["authorization"] = f"Bearer {secret}"
    return headers


def _classify_transport_error(exc: Exception) -> OutcomeKind:
    # httpx-aiohttp maps every aiohttp connection error to ConnectTimeout; look at the cause.
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(
        cause, aiohttp.ServerTimeoutError
    ):
        return OutcomeKind.NETWORK_ERROR
    if isinstance(exc, httpx.TimeoutException) or isinstance(cause, asyncio.TimeoutError):
        return OutcomeKind.TIMEOUT
    return OutcomeKind.NETWORK_ERROR


class Upstream:
    """Sends one attempt to one target and turns what happens into a reply or an outcome.

    Requests go straight to the httpx transport rather than through ``AsyncClient.send``: the
    client's cookie jar would carry one account's cookies into another account's requests, and
    its auth, redirect and cookie layers cost a fifth of the gateway's CPU per request while
    the gateway needs none of them. One transport (one connection pool) per event loop,
    provider and outbound proxy.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport
        self._transports: dict[
            tuple[asyncio.AbstractEventLoop, str, str], httpx.AsyncBaseTransport
        ] = {}
        self.timeout = default_timeout()

    def transport(self, provider: str = "", proxy_url: str = "") -> httpx.AsyncBaseTransport:
        """The pool for this provider and proxy: one provider's streams can never exhaust the
        slots another provider needs (a pool wait would count as that provider's timeout)."""
        if self._transport is not None:
            return self._transport
        key = (asyncio.get_running_loop(), provider, proxy_url)
        transport = self._transports.get(key)
        if transport is None:
            transport = self._transports[key] = build_transport(proxy_url)
        return transport

    async def send(
        self, target: Target, payload: bytes, *, stream: bool
    ) -> tuple[Outcome, UpstreamReply | None]:
        """One attempt; the reply is set only on success and the caller must close it."""
        started = time.monotonic()
        request = httpx.Request(
            "POST",
            f"{target.connection.base_url}/chat/completions",
            content=payload,
            headers=_upstream_headers(target, stream),
            extensions={"timeout": self.timeout},
        )
        response: httpx.Response | None = None
        try:
            transport = self.transport(target.provider.slug, target.connection.proxy_url)
            response = await transport.handle_async_request(request)
            response.request = request
            return await _read(response, stream, started)
        except (httpx.TransportError, aiohttp.ClientError, ValueError) as exc:
            # aiohttp errors the transport does not translate (a malformed reply) count too.
            if response is not None:
                await response.aclose()
            return _failure(_classify_transport_error(exc), type(exc).__name__, started), None
        except BaseException:
            if response is not None:
                await response.aclose()
            raise


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _failure(kind: OutcomeKind, detail: str, started: float) -> Outcome:
    return Outcome(kind, detail=detail or kind.value, latency_ms=_elapsed_ms(started))


async def _read(
    response: httpx.Response, stream: bool, started: float
) -> tuple[Outcome, UpstreamReply | None]:
    content_type = response.headers.get("content-type", "application/json")
    if not 200 <= response.status_code < 300:  # a redirect is no answer either
        body = await _read_limited(response)
        await response.aclose()
        headers = {name.lower(): value for name, value in response.headers.items()}
        outcome = Outcome(
            OutcomeKind.HTTP_ERROR, response.status_code, headers, body,
            f"HTTP {response.status_code}", _elapsed_ms(started),
        )  # fmt: skip
        return outcome, None
    if not stream:
        body = await response.aread()
        await response.aclose()
        reply = UpstreamReply(response.status_code, content_type, body)
    else:
        # Wait for the first chunk before committing: a failure before it can still fail over.
        chunks = _raw_chunks(response)
        first = await anext(chunks, b"")
        reply = UpstreamReply(response.status_code, content_type, first, response, chunks)
    outcome = Outcome(OutcomeKind.SUCCESS, response.status_code, latency_ms=_elapsed_ms(started))
    return outcome, reply


def _raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as it arrives; a response built already read (as tests may) yields it whole."""
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return response.aiter_raw()
    return _once(content)


async def _once(content: bytes) -> AsyncIterator[bytes]:
    if content:
        yield content


async def _read_limited(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in _raw_chunks(response):
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_LIMIT_BYTES:
            break
    return b"".join(parts)[:ERROR_BODY_LIMIT_BYTES]
