"""Naming an upstream transport failure from its exception chain
(``routing.proxy.upstream.errors``).

Each failure is built as the aiohttp transport raises it: the operating system's error, the
aiohttp error raised from it, then httpx-aiohttp's own translation of that into an httpx error
(which calls a reset, a refusal and a DNS failure alike ``ConnectTimeout``).
"""

from __future__ import annotations

import errno
import socket
from types import SimpleNamespace
from typing import Any

import aiohttp
import httpx
import pytest
from httpx_aiohttp.transport import map_aiohttp_exceptions

from routing.domain.attempts.outcomes import OutcomeKind
from routing.proxy.upstream.errors import (
    BODY_CUT,
    CLOSED,
    CONNECT_TIMEOUT,
    DNS_FAILED,
    READ_TIMEOUT,
    REFUSED,
    RESET,
    classify_transport_error,
    describe_transport_error,
)

KEY: Any = SimpleNamespace(host="upstream.test", port=443, ssl=True)  # aiohttp's ConnectionKey


def raised_from(error: BaseException, cause: BaseException | None = None) -> BaseException:
    """``error`` as caught after being raised (from ``cause``, if given)."""
    try:
        if cause is None:
            raise error
        raise error from cause
    except BaseException as caught:
        return caught


def through_transport(error: BaseException) -> Exception:
    """What httpx-aiohttp raises for ``error``, with ``error`` as its cause."""
    try:
        with map_aiohttp_exceptions():
            raise error
    except Exception as mapped:
        return mapped
    raise AssertionError("not raised")


def reset() -> BaseException:
    os_error = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    return raised_from(
        aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer"), os_error
    )


def refused() -> BaseException:
    os_error = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
    return raised_from(aiohttp.ClientConnectorError(KEY, os_error), os_error)


def dns_failure() -> BaseException:
    os_error = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return raised_from(aiohttp.ClientConnectorError(KEY, os_error), os_error)


def connect_timeout() -> BaseException:
    return raised_from(aiohttp.ConnectionTimeoutError("Connection timeout to host"), TimeoutError())


def read_timeout() -> BaseException:
    return aiohttp.SocketTimeoutError("Timeout on reading data from socket")


def disconnected() -> BaseException:
    return aiohttp.ServerDisconnectedError()


def body_cut() -> BaseException:
    return aiohttp.ClientPayloadError("Response payload is not completed")


CASES = {
    "reset": (reset, RESET, OutcomeKind.NETWORK_ERROR),
    "refused": (refused, REFUSED, OutcomeKind.NETWORK_ERROR),
    "dns": (dns_failure, DNS_FAILED, OutcomeKind.NETWORK_ERROR),
    "connect timeout": (connect_timeout, CONNECT_TIMEOUT, OutcomeKind.TIMEOUT),
    "read timeout": (read_timeout, READ_TIMEOUT, OutcomeKind.TIMEOUT),
    "disconnected": (disconnected, CLOSED, OutcomeKind.NETWORK_ERROR),
    "body cut": (body_cut, BODY_CUT, OutcomeKind.NETWORK_ERROR),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_chain_names_what_happened(case: str) -> None:
    make, named, kind = CASES[case]
    error = through_transport(make())
    assert describe_transport_error(error) == named
    assert classify_transport_error(error) is kind  # what the breaker counts is unchanged


@pytest.mark.parametrize("make", [reset, refused, dns_failure, disconnected])
def test_a_failure_the_transport_calls_a_connect_timeout_is_not_named_one(make: Any) -> None:
    error = through_transport(make())
    assert isinstance(error, httpx.ConnectTimeout)  # httpx-aiohttp's translation (sic)
    assert "timeout" not in describe_transport_error(error)


def test_an_errno_the_table_does_not_name_falls_back_to_the_aiohttp_type() -> None:
    error = through_transport(aiohttp.ClientOSError(errno.EIO, "I/O error"))
    assert describe_transport_error(error) == "ClientOSError"


def test_a_bare_httpx_error_keeps_its_own_name() -> None:
    assert describe_transport_error(httpx.ReadError("connection reset by peer")) == "ReadError"
    assert describe_transport_error(ValueError("bad chunk")) == "ValueError"


def test_a_chain_that_loops_back_on_itself_ends() -> None:
    first, second = httpx.ReadError("a"), httpx.ReadError("b")
    first.__context__, second.__context__ = second, first
    assert describe_transport_error(first) == "ReadError"
