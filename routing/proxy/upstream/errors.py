"""What an upstream transport failure was, read from its exception chain (pure).

``httpx-aiohttp`` translates every aiohttp connection error into ``httpx.ConnectTimeout``, so
the httpx type says "connect timeout" for a reset, a refused connection or a failed DNS
lookup alike. The aiohttp error it was raised from (``__cause__``) and the operating system's
error below that say what happened; :func:`describe_transport_error` names it for the
client's error message and the attempt's outcome detail, :func:`classify_transport_error`
decides whether it counts as a timeout or a network error.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Iterator

import aiohttp
import httpx

from routing.domain.attempts.outcomes import OutcomeKind

RESET = "connection reset by peer"
REFUSED = "connection refused"
DNS_FAILED = "DNS lookup failed"
CONNECT_TIMEOUT = "connect timeout"
READ_TIMEOUT = "read timeout"
TIMEOUT = "timeout"
CLOSED = "connection closed by peer"
BODY_CUT = "response body cut short"

_ERRNO = {
    errno.ECONNRESET: RESET,
    errno.ECONNREFUSED: REFUSED,
    errno.ETIMEDOUT: "connection timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNABORTED: "connection aborted",
    errno.EPIPE: "broken pipe",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during, outermost first (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _named(exc: BaseException) -> str | None:
    """What one link of the chain says happened, or None if it says nothing precise."""
    if isinstance(exc, socket.gaierror):
        return DNS_FAILED
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return CONNECT_TIMEOUT
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return READ_TIMEOUT
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return TIMEOUT
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, socket.gaierror):
        return DNS_FAILED
    if isinstance(exc, OSError) and exc.errno in _ERRNO:
        return _ERRNO[exc.errno]
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return CLOSED
    return None


def describe_transport_error(exc: BaseException) -> str:
    """What happened, in a few words: reset, refused, DNS failure, connect or read timeout...

    The first link of the chain below the httpx layer that names a cause wins; failing that,
    the aiohttp error's type, or the exception's own (an httpx error raised bare)."""
    links = list(_chain(exc))
    below_httpx = [link for link in links if not isinstance(link, httpx.HTTPError)]
    for link in below_httpx:
        named = _named(link)
        if named is not None:
            return named
    for link in below_httpx:
        if isinstance(link, aiohttp.ClientPayloadError):
            return BODY_CUT
        if isinstance(link, asyncio.TimeoutError):
            return TIMEOUT
    aiohttp_error = next((link for link in links if isinstance(link, aiohttp.ClientError)), None)
    return type(aiohttp_error or exc).__name__


def classify_transport_error(exc: Exception) -> OutcomeKind:
    """A timeout or a network error, for the breaker and the client's status (504 or 502)."""
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(
        cause, aiohttp.ServerTimeoutError
    ):
        return OutcomeKind.NETWORK_ERROR
    if isinstance(exc, httpx.TimeoutException) or isinstance(cause, asyncio.TimeoutError):
        return OutcomeKind.TIMEOUT
    return OutcomeKind.NETWORK_ERROR
