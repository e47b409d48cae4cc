"""Garbage is a failure: a 2xx the client could not use is a 502 the attempt loop fails over on.

A non-JSON (HTML, empty) body to a plain request, a JSON or non-SSE answer to a stream request,
and a body over ``MAX_UPSTREAM_BODY_BYTES`` are each a failed attempt: the next target is
tried, and with none left the client gets an OpenAI-style 502 (a
malformed or non-JSON 200 is retried per policy, then the next target is tried).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from pytest_django.fixtures import Settings

from routing.domain.attempts.breaker_rules import REQUEST_SCOPED_CODES
from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.plan.planning import Target
from routing.proxy.upstream.client import Upstream
from tests.routing.harness import (
    ACME_MODEL,
    BACKUP,
    COMPLETION,
    OK,
    PRIMARY,
    Behaviour,
    Gateway,
    Reply,
    answer,
    chat,
    communicator,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

HTML = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
SSE = {"content-type": "text/event-stream"}
FINISHED = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]}'
EVENTS = [FINISHED + b"\n\n", b"data: [DONE]\n\n"]
MALFORMED = "upstream_malformed_response"
TOO_LARGE = "upstream_response_too_large"


def sse_answer(chunks: list[bytes], headers: dict[str, str] | None = None) -> Behaviour:
    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers or SSE, content=_chunks(chunks))

    return behaviour


async def _chunks(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def stream_call(gateway: Gateway) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat(ACME_MODEL, stream=True))
    return await read_reply(comm)


def assert_failed_with(reply: Reply, code: str) -> None:
    assert reply.status == 502
    assert reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", code)


# --- plain requests -------------------------------------------------------------------------


GARBAGE = {
    "html": answer(200, HTML, {"content-type": "text/html"}),
    "html labelled json": answer(200, HTML),
    "empty": answer(200, b""),
    "json array": answer(200, b"[1, 2]"),
    "truncated json": answer(200, orjson.dumps(COMPLETION)[:-3]),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
async def test_a_2xx_that_is_not_a_json_object_fails_over(
    gateway: Gateway, primary: int, backup: int, garbage: Behaviour
) -> None:
    gateway.fake.behaviours.update({PRIMARY: garbage, BACKUP: OK})

    reply = await gateway.call()

    assert (reply.status, reply.json()) == (200, COMPLETION)
    assert reply.connection == backup
    assert gateway.fake.calls == [PRIMARY, PRIMARY, BACKUP]  # retried once, like a 5xx


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
async def test_with_one_target_the_client_gets_a_502_malformed(
    gateway: Gateway, primary: int, garbage: Behaviour
) -> None:
    gateway.fake.behaviours[PRIMARY] = garbage

    reply = await gateway.call()

    assert_failed_with(reply, MALFORMED)
    message = reply.json()["error"]["message"]
    assert message == "The upstream answered 200 with a body that is not JSON."
    assert b"<html>" not in reply.body


@pytest.mark.parametrize("status", [204, 205])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_status_that_carries_no_content_is_no_answer_even_with_a_body(
    gateway: Gateway, primary: int, backup: int, status: int, stream: bool
) -> None:
    # Relayed, a 204 holding a completion broke the client's connection (HTTP allows it none).
    ok = sse_answer(EVENTS) if stream else OK
    gateway.fake.behaviours.update({PRIMARY: answer(status, orjson.dumps(COMPLETION)), BACKUP: ok})

    reply = await (stream_call(gateway) if stream else gateway.call())

    assert reply.status == 200 and reply.connection == backup
    assert gateway.fake.calls == [PRIMARY, PRIMARY, BACKUP]  # retried once, like a 5xx


@pytest.mark.parametrize("status", [204, 205])
async def test_alone_a_status_that_carries_no_content_is_a_502_malformed(
    gateway: Gateway, primary: int, status: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = answer(status, orjson.dumps(COMPLETION))

    reply = await gateway.call()

    assert_failed_with(reply, MALFORMED)
    assert "carries no content" in reply.json()["error"]["message"]


async def test_the_malformed_502_is_not_request_scoped() -> None:
    upstream = Upstream(httpx.MockTransport(lambda request: httpx.Response(200, content=HTML)))
    outcome, reply = await upstream.send(_target(), b"{}", stream=False)
    assert reply is None and (outcome.status, outcome.detail) == (502, "malformed")
    assert not any(code in outcome.body for code in REQUEST_SCOPED_CODES)
    assert MALFORMED.encode() in outcome.body


# --- stream requests ------------------------------------------------------------------------


NOT_A_STREAM = {
    "json answered": answer(200, orjson.dumps(COMPLETION)),
    "html answered": answer(200, HTML, {"content-type": "text/html; charset=utf-8"}),
    "plain text, not sse": sse_answer([b"Hello there"], {"content-type": "text/plain"}),
    "sse type, json body": sse_answer([orjson.dumps(COMPLETION)]),
    "empty stream": sse_answer([]),
}


@pytest.mark.parametrize("garbage", NOT_A_STREAM.values(), ids=NOT_A_STREAM.keys())
async def test_a_stream_answered_with_something_else_fails_over(
    gateway: Gateway, primary: int, backup: int, garbage: Behaviour
) -> None:
    gateway.fake.behaviours.update({PRIMARY: garbage, BACKUP: sse_answer(EVENTS)})

    reply = await stream_call(gateway)

    assert (reply.status, reply.body) == (200, b"".join(EVENTS))
    assert reply.connection == backup


@pytest.mark.parametrize("garbage", NOT_A_STREAM.values(), ids=NOT_A_STREAM.keys())
async def test_a_stream_answered_with_something_else_is_a_502_alone(
    gateway: Gateway, primary: int, garbage: Behaviour
) -> None:
    gateway.fake.behaviours[PRIMARY] = garbage

    assert_failed_with(await stream_call(gateway), MALFORMED)


STREAM_STARTS = {
    "comment": [b": keep-alive\n\n", *EVENTS],
    "event field": [b"event: message\n", *EVENTS],
    "blank lines first": [b"\n\n", b"\r\n", *EVENTS],
    "field name cut": [b"da", FINISHED[2:] + b"\n\n", b"data: [DONE]\n\n"],
    "byte order mark": [b"\xef\xbb\xbf" + EVENTS[0], EVENTS[1]],
}


@pytest.mark.parametrize("chunks", STREAM_STARTS.values(), ids=STREAM_STARTS.keys())
async def test_a_well_formed_stream_start_is_relayed_whole(
    gateway: Gateway, primary: int, chunks: list[bytes]
) -> None:
    gateway.fake.behaviours[PRIMARY] = sse_answer(chunks)

    reply = await stream_call(gateway)

    # Relayed event by event: what precedes the first event (a byte order mark, blank lines)
    # is not an event and is not relayed.
    whole = b"".join(chunks).removeprefix(b"\xef\xbb\xbf").lstrip(b"\r\n")
    assert (reply.status, reply.body) == (200, whole)


async def test_an_sse_body_labelled_text_plain_is_relayed(gateway: Gateway, primary: int) -> None:
    gateway.fake.behaviours[PRIMARY] = sse_answer(EVENTS, {"content-type": "text/plain"})

    reply = await stream_call(gateway)

    assert (reply.status, reply.body) == (200, b"".join(EVENTS))


# --- the body cap ---------------------------------------------------------------------------


class CountingStream(httpx.AsyncByteStream):
    """``count`` chunks of ``size`` bytes, remembering how many were read and whether closed."""

    def __init__(self, count: int, size: int) -> None:
        self.count, self.size, self.read, self.closed = count, size, 0, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"pad": "'
        for _ in range(self.count):
            self.read += 1
            yield b"x" * self.size
        yield b'"}'

    async def aclose(self) -> None:
        self.closed = True


async def test_a_body_over_the_cap_fails_over(
    gateway: Gateway, primary: int, backup: int, settings: Settings
) -> None:
    settings.MAX_UPSTREAM_BODY_BYTES = 4096
    big = orjson.dumps({**COMPLETION, "pad": "x" * 5000})
    gateway.fake.behaviours.update({PRIMARY: answer(200, big), BACKUP: OK})

    reply = await gateway.call()

    assert (reply.status, reply.connection) == (200, backup)


async def test_a_body_over_the_cap_alone_is_a_502_too_large(
    gateway: Gateway, primary: int, settings: Settings
) -> None:
    settings.MAX_UPSTREAM_BODY_BYTES = 4096
    gateway.fake.behaviours[PRIMARY] = answer(200, b"x" * 5000)

    assert_failed_with(await gateway.call(), TOO_LARGE)


async def test_the_cap_stops_reading_and_closes_the_response(settings: Settings) -> None:
    settings.MAX_UPSTREAM_BODY_BYTES = 4096
    body = CountingStream(count=1000, size=1024)
    upstream = Upstream(httpx.MockTransport(lambda request: httpx.Response(200, stream=body)))

    outcome, reply = await upstream.send(_target(), b"{}", stream=False)

    assert reply is None and (outcome.status, outcome.detail) == (502, "too large")
    assert TOO_LARGE.encode() in outcome.body
    assert body.read <= 5 and body.closed


async def test_a_declared_length_over_the_cap_is_not_read(settings: Settings) -> None:
    settings.MAX_UPSTREAM_BODY_BYTES = 4096
    body = CountingStream(count=10, size=1024)
    headers = {"content-length": str(10 * 1024 + 11)}
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=headers, stream=body)
    )

    outcome, _ = await Upstream(transport).send(_target(), b"{}", stream=False)

    assert TOO_LARGE.encode() in outcome.body
    assert body.read == 0 and body.closed


async def test_a_body_at_the_cap_is_a_success(settings: Settings) -> None:
    body = CountingStream(count=4, size=1024)
    settings.MAX_UPSTREAM_BODY_BYTES = 4 * 1024 + 11
    upstream = Upstream(httpx.MockTransport(lambda request: httpx.Response(200, stream=body)))

    outcome, reply = await upstream.send(_target(), b"{}", stream=False)

    assert outcome.ok and reply is not None and len(reply.body) == 4 * 1024 + 11


def _target() -> Target:
    """A plain target for ``Upstream.send`` alone (no database)."""
    provider = ProviderInfo("acme", "Acme", "api_key", "http://acme.test/v1", "openai")
    connection = ConnectionInfo(1, "acme", "primary", 10, "http://acme.test/v1", "api_key", PRIMARY)
    return Target(provider, connection, "m1")
