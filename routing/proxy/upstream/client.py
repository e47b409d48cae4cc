"""The one outbound seam: one pooled httpx transport per event loop.

In production requests run on ``httpx-aiohttp``'s transport (aiohttp's connection pool is
several times cheaper per request than httpx's own at concurrency); tests pass their own
transport, typically ``httpx.MockTransport``. Every request has explicit timeouts. Nothing of
the client's request headers is copied: upstream headers are built here from the connection.

A 2xx the client could not use is a failed attempt (a 502 the loop fails over on), never a
success: a plain answer that is not a JSON object or is larger than
``MAX_UPSTREAM_BODY_BYTES`` (read incrementally, never past the cap), and a stream answer
labelled JSON/HTML or whose first bytes do not start like server-sent events.

A stream is read up to its first token before the attempt counts as answered
(``routing.proxy.streams``): a stream that breaks, stalls or says nothing before then is a failed
attempt the loop can still fail over from. ``attempts.streamIdleMs`` is the transport's read
timeout, and after commit also the longest a stream may go without an event that changes the
answer (``routing.proxy.stream_clock``); a pooled connection whose answer was not read to its end is
closed, never reused. A transport failure's outcome names what happened
(``routing.proxy.upstream.errors``): a reset, a refused connection, a failed DNS lookup, a connect
or a read timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import httpx
import orjson
from django.conf import settings
from httpx_aiohttp import AiohttpTransport

from resilience.domain.attempts.stream_recovery import WatchdogSettings
from routing.domain.attempts.admission import EXECUTION_TIMEOUT, local_error_body
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.client.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.client.errors import in_band_status
from routing.domain.config.snapshot import Unsendable
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.domain.streams.state import StreamState
from routing.domain.streams.throughput import ThroughputWatchdog
from routing.proxy.streams import StreamBroken, UpstreamStream
from routing.proxy.upstream.body import (
    BOM,
    json_object,
    not_a_stream,
    raw_chunks,
    read_capped,
    read_limited,
    sse_head,
)
from routing.proxy.upstream.errors import classify_transport_error, describe_transport_error

RELAYED_ERROR_HEADERS = ("retry-after", "x-ratelimit-reset", "x-ratelimit-remaining-requests")
USER_AGENT = "OmniRoute/0.1"
UNSENDABLE_SECRET = "connection_secret_unsendable"
UNUSABLE_URL = "connection_url_unusable"


# Garbage is a failure: a 2xx the client could not use is a 502 the attempt loop fails over on.


@dataclass(frozen=True, slots=True)
class _Garbage:
    """A 2xx answer the client cannot use, as the 502 it becomes."""

    code: str
    message: str
    detail: str


MALFORMED = _Garbage(
    "upstream_malformed_response",
    "The upstream answered 200 with a body that is not JSON.",
    "malformed",
)
MALFORMED_STREAM = _Garbage(
    "upstream_malformed_response",
    "The upstream answered 200 with a stream that is not server-sent events.",
    "malformed",
)
NO_CONTENT = _Garbage(
    "upstream_malformed_response",
    "The upstream answered with a status that carries no content (204 or 205).",
    "malformed",
)
# Statuses that may carry no body: relayed, one holding a body breaks the client's connection.
NO_CONTENT_STATUSES = frozenset({204, 205})
TOO_LARGE = _Garbage(
    "upstream_response_too_large",
    "The upstream answer exceeds the gateway's limit on upstream bodies.",
    "too large",
)


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


@dataclass(frozen=True, slots=True)
class AttemptLimits:
    """One attempt's limits: the transport's idle (read) timeout, which after commit also
    bounds the time without an event that changes the answer, and the stream watchdog. The
    time-to-first-token limit is the attempt loop's: it bounds the whole pre-commit phase."""

    idle_seconds: float | None = None  # None: ``OMNIROUTE_UPSTREAM_READ_TIMEOUT`` (bytes only)
    watchdog: WatchdogSettings | None = None  # only when enabled
    headers_seconds: float | None = None  # the local queue's execution limit


NO_LIMITS = AttemptLimits()


@dataclass(slots=True)
class UpstreamReply:
    """A successful upstream answer, not yet relayed: the whole body (and ``answer``, the JSON
    object it holds), or a stream whose ``body`` is its head (everything up to the first
    token)."""

    status: int
    content_type: str
    body: bytes
    answer: dict[str, Any] | None = None  # a plain answer, parsed once: read, never parse again
    response: httpx.Response | None = None
    stream: UpstreamStream | None = None
    outcome: Outcome | None = None  # a stream's success, recorded once the stream has ended
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)  # run once

    async def aclose(self) -> None:
        try:
            if self.stream is not None:
                self.stream.clock.stop()
            if self.response is not None:
                await self.response.aclose()
        finally:
            callbacks, self.on_close = self.on_close, []
            for callback in callbacks:
                await callback()


Forwarded = tuple[tuple[str, str], ...]
"""Client request headers an endpoint passes upstream (``anthropic-version``, ...)."""


def upstream_request(
    url: httpx.URL, host: bytes, headers: dict[str, str], content: bytes, timeout: dict[str, float]
) -> httpx.Request:
    """A POST of ``content`` to ``url`` (whose ``Host`` is ``host``), its body read already and
    its headers given whole. The same request as ``httpx.Request(content=...)`` builds, with the
    same header names on the wire, at a third of its CPU: httpx merges its default headers in one
    at a time, each a search of the list it builds (docs/architecture.md, "One request")."""
    raw = [(b"Host", host)]
    raw += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]
    raw.append((b"Content-Length", str(len(content)).encode("ascii")))
    request = httpx.Request(
        "POST", url, headers=raw, stream=httpx.ByteStream(content), extensions={"timeout": timeout}
    )
    request.read()  # the content is the bytes given (one part: nothing is copied)
    return request


def _upstream_headers(target: Target, stream: bool, forwarded: Forwarded) -> dict[str, str]:
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
    headers.update(forwarded)
    return headers


class Upstream:
    """Sends one attempt to one target and turns what happens into a reply or an outcome.

    Requests go straight to the httpx transport rather than through ``AsyncClient.send``: the
    client's cookie jar would carry one account's cookies into another account's requests, and
    its auth, redirect and cookie layers cost a fifth of the gateway's CPU per request while
    the gateway needs none of them. One transport (one connection pool) per event loop,
    provider and outbound proxy, open until :meth:`aclose`.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport
        self._transports: dict[
            tuple[asyncio.AbstractEventLoop, str, str], httpx.AsyncBaseTransport
        ] = {}
        self.timeout = default_timeout()
        self._timeouts: dict[float, dict[str, float]] = {}
        self._urls: dict[tuple[str, str], tuple[httpx.URL, bytes]] = {}
        # Providers that refused the usage request the gateway adds to a stream (learnt from
        # their answers, per process): they are no longer asked.
        self.usage_refused: set[str] = set()

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

    async def aclose(self) -> None:
        """Close the pools this event loop opened (on the gateway's stop: an aiohttp session
        left open is reported at exit). A request after this opens a new pool; a transport
        handed in is its owner's to close."""
        loop = asyncio.get_running_loop()
        for key in [key for key in self._transports if key[0] is loop]:
            await self._transports.pop(key).aclose()

    def url(self, base_url: str, path: str) -> tuple[httpx.URL, bytes]:
        """The parsed URL of an endpoint's path under a base URL, and its ``Host`` header (parsing
        one costs ~20 µs)."""
        known = self._urls.get((base_url, path))
        if known is None:
            url = httpx.URL(f"{base_url}{path}")
            known = self._urls[base_url, path] = (url, url.netloc)
        return known

    def _timeout(self, idle_seconds: float | None) -> dict[str, float]:
        if idle_seconds is None or idle_seconds == self.timeout["read"]:
            return self.timeout
        timeout = self._timeouts.get(idle_seconds)
        if timeout is None:
            timeout = self._timeouts[idle_seconds] = {**self.timeout, "read": idle_seconds}
        return timeout

    async def send(
        self,
        target: Target,
        payload: bytes,
        *,
        stream: bool,
        limits: AttemptLimits = NO_LIMITS,
        endpoint: Endpoint = CHAT_COMPLETIONS,
        forwarded: Forwarded = (),
        hide_usage: bool = False,
    ) -> tuple[Outcome, UpstreamReply | None]:
        """One attempt at ``endpoint``'s upstream path; the reply is set only on success and
        the caller must close it. ``hide_usage``: the client did not ask for the usage block
        the payload asks for (``ClientRequest.hides_usage``); its stream goes without it."""
        started = time.monotonic()
        if target.connection.unsendable:  # stored before it was checked when saved
            return _unsendable(target.connection.unsendable, started), None
        url, host = self.url(target.connection.base_url, endpoint.upstream_path)
        headers = _upstream_headers(target, stream, forwarded)
        request = upstream_request(url, host, headers, payload, self._timeout(limits.idle_seconds))
        response: httpx.Response | None = None
        try:
            transport = self.transport(target.provider.slug, target.connection.proxy_url)
            if limits.headers_seconds is None:
                response = await transport.handle_async_request(request)
            else:
                try:
                    async with asyncio.timeout(limits.headers_seconds):
                        response = await transport.handle_async_request(request)
                except TimeoutError:
                    return _execution_timeout(limits.headers_seconds, started), None
            response.request = request
            state = endpoint.stream_state
            if hide_usage and endpoint.hiding_usage is not None:
                state = endpoint.hiding_usage
            return await _read(response, stream, started, limits, target.label, state)
        except (httpx.TransportError, aiohttp.ClientError, ValueError) as exc:
            # aiohttp errors the transport does not translate (a malformed reply) count too.
            if response is not None:
                await response.aclose()
            kind = classify_transport_error(exc)
            return _failure(kind, describe_transport_error(exc), started), None
        except BaseException:
            if response is not None:
                await response.aclose()
            raise


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _failure(kind: OutcomeKind, detail: str, started: float) -> Outcome:
    return Outcome(kind, detail=detail or kind.value, latency_ms=_elapsed_ms(started))


async def _read(
    response: httpx.Response,
    stream: bool,
    started: float,
    limits: AttemptLimits,
    label: str,
    stream_state: Callable[[], StreamState],
) -> tuple[Outcome, UpstreamReply | None]:
    content_type = response.headers.get("content-type", "application/json")
    if not 200 <= response.status_code < 300:  # a redirect is no answer either
        body = await read_limited(response)
        await response.aclose()
        headers = {name.lower(): value for name, value in response.headers.items()}
        outcome = Outcome(
            OutcomeKind.HTTP_ERROR,
            response.status_code,
            headers,
            body,
            f"HTTP {response.status_code}",
            _elapsed_ms(started),
        )
        return outcome, None
    if response.status_code in NO_CONTENT_STATUSES:  # no answer, whatever it holds
        await response.aclose()
        return _garbage(NO_CONTENT, started), None
    if not stream:
        whole = await read_capped(response)
        await response.aclose()
        if whole is None:
            return _garbage(TOO_LARGE, started), None
        whole = whole.removeprefix(BOM)  # as a stream's first chunk: JSON has no byte order mark
        answer = json_object(whole)
        if answer is None:
            return _garbage(MALFORMED, started), None
        reply = UpstreamReply(response.status_code, content_type, whole, answer)
    else:
        if not_a_stream(response.headers.get("content-type", "")):
            await response.aclose()
            return _garbage(MALFORMED_STREAM, started), None
        # Read up to the first token before committing: a failure before it can still fail over.
        chunks = raw_chunks(response)
        first = await sse_head(chunks)
        if first is None:
            await response.aclose()
            return _garbage(MALFORMED_STREAM, started), None
        watchdog = ThroughputWatchdog(limits.watchdog) if limits.watchdog else None
        state = stream_state()
        first = first.removeprefix(BOM)
        idle, most = limits.idle_seconds, settings.MAX_SSE_EVENT_BYTES
        events = UpstreamStream(
            first, chunks, watchdog, label, state, max_event_bytes=most, idle_seconds=idle
        )
        broken: StreamBroken | None = None
        head = b""
        try:
            head = await events.head()
        except StreamBroken as failed:
            broken = failed
        except (httpx.TransportError, aiohttp.ClientError, ValueError) as exc:
            broken = StreamBroken(classify_transport_error(exc), describe_transport_error(exc))
        if broken is not None:  # the stream answered, then failed before its first token
            await response.aclose()
            outcome = broken.outcome(_elapsed_ms(started), started=True)
            if broken.kind is OutcomeKind.HTTP_ERROR and broken.body:  # before the first token
                outcome = replace(outcome, status=in_band_status(broken.body))
            return outcome, None
        reply = UpstreamReply(
            response.status_code, content_type, head, response=response, stream=events
        )
    quota = rate_limit_headers(response.headers)
    outcome = Outcome(
        OutcomeKind.SUCCESS, response.status_code, quota, latency_ms=_elapsed_ms(started)
    )
    return outcome, reply


RATE_LIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_RAW_RATE_LIMIT_PREFIXES = tuple(prefix.encode("ascii") for prefix in RATE_LIMIT_PREFIXES)


def rate_limit_headers(headers: httpx.Headers) -> dict[str, str]:
    """The rate-limit headers of a success (lower-cased), which the quota snapshots read; the
    rest of a success's headers are neither kept nor decoded (most answers have none)."""
    found = [
        (name, value)
        for name, value in headers.raw
        if name.lower().startswith(_RAW_RATE_LIMIT_PREFIXES)
    ]
    if not found:
        return {}
    encoding = headers.encoding  # as httpx decodes them: ascii, else utf-8, else latin-1
    return {name.lower().decode(encoding): value.decode(encoding) for name, value in found}


def _execution_timeout(seconds: float, started: float) -> Outcome:
    """The local request queue's execution limit ran out before the response headers: a local,
    request-scoped 504, never the upstream's failure."""
    message = (
        f"The upstream did not start answering within the local request queue's execution "
        f"limit ({seconds * 1000:.0f} ms, requestQueue.maxWaitMs)."
    )
    body = local_error_body(message, EXECUTION_TIMEOUT, "timeout_error")
    headers = {"content-type": "application/json"}
    return Outcome(OutcomeKind.LOCAL, 504, headers, body, EXECUTION_TIMEOUT, _elapsed_ms(started))


def _unsendable(part: Unsendable, started: float) -> Outcome:
    """A part of the connection the client cannot send (its secret in a header, its base or
    proxy URL), stored before it was checked when saved: a local 503 the loop fails over on,
    never the upstream's failure."""
    if part is Unsendable.SECRET:
        message = "The connection's secret cannot be sent in an HTTP header"
        code = UNSENDABLE_SECRET
    else:
        message = f"The connection's {part.value} cannot be used by the gateway's HTTP client"
        code = UNUSABLE_URL
    body = local_error_body(f"{message}; an operator must enter it again.", code, "server_error")
    headers = {"content-type": "application/json"}
    return Outcome(OutcomeKind.LOCAL, 503, headers, body, code, _elapsed_ms(started))


def _garbage(garbage: _Garbage, started: float) -> Outcome:
    error = {"message": garbage.message, "type": "upstream_error", "code": garbage.code}
    body = orjson.dumps({"error": error})
    headers = {"content-type": "application/json"}
    return Outcome(OutcomeKind.HTTP_ERROR, 502, headers, body, garbage.detail, _elapsed_ms(started))
