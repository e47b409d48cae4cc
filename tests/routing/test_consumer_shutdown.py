"""The process starts to stop (``omniroute.core.stopping``): a stream still open ends with the
in-band ``server_shutting_down`` error, a stream whose head has not gone out gets a 503, a
plain request is left to finish, and a request that arrives once the stop has begun is
refused with a 503 ``server_shutting_down``.

Each test sets a signal of its own, put in place of the process's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

import routing.proxy.clock as proxy_clock
from omniroute.core import stopping
from routing.domain.streams.chat import error_event
from routing.domain.streams.sse import DONE_EVENT
from routing.models import Combo, Provider
from routing.proxy.recovery import SHUTDOWN_MESSAGE
from routing.proxy.relay import KEEP_ALIVE
from routing.services import combo_save
from tests.routing.harness import (
    PRIMARY,
    RECEIVE_TIMEOUT_SECONDS,
    Behaviour,
    Gateway,
    answer,
    by_model,
    chat,
    communicator,
    error,
    read_reply,
    send_body,
)
from tests.routing.stream_support import SSE, answer_chunks, ask

pytestmark = pytest.mark.django_db(transaction=True)

SHUTTING_DOWN_EVENT = error_event(SHUTDOWN_MESSAGE, "server_shutting_down")


@pytest.fixture
def signal(monkeypatch: pytest.MonkeyPatch) -> stopping.ShuttingDown:
    """A stop signal of this test's own, in place of the process's."""
    fresh = stopping.ShuttingDown()
    monkeypatch.setattr(stopping, "shutting_down", fresh)
    return fresh


def held(before: list[bytes]) -> Behaviour:
    """Stream ``before``, then nothing more, for good (an answer still being written)."""

    async def body() -> AsyncIterator[bytes]:
        for part in before:
            yield part
        await asyncio.Event().wait()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=body())

    return behaviour


async def test_an_open_stream_ends_with_the_in_band_error_when_the_stop_begins(
    gateway: Gateway, primary: int, signal: stopping.ShuttingDown
) -> None:
    chunks = answer_chunks()
    gateway.fake.behaviours[PRIMARY] = held(chunks[:3])
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat(stream=True))
    start = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)
    first = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)  # the answer has begun

    signal.set()

    parts = [first["body"]]
    while (message := await comm.receive_output(RECEIVE_TIMEOUT_SECONDS))["more_body"]:
        parts.append(message["body"])
    parts.append(message["body"])
    await comm.wait(RECEIVE_TIMEOUT_SECONDS)
    body = b"".join(parts)
    assert start["status"] == 200
    assert body.startswith(b"".join(chunks[:3]))  # what the upstream had sent, whole
    assert body.endswith(SHUTTING_DOWN_EVENT)  # then the error, and no [DONE] (as any break)


@pytest.fixture
def duo(acme: Provider, primary: int) -> None:
    targets = [{"provider": acme, "model": "m1"}, {"provider": acme, "model": "m2"}]
    combo_save(combo=Combo(), fields={"name": "duo"}, targets=targets)


async def test_a_stream_waiting_after_a_keep_alive_ends_with_the_error_and_done(
    gateway: Gateway,
    duo: None,
    signal: stopping.ShuttingDown,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limited = error(429, "slow down", "rate_limit_exceeded", {"retry-after": "10"})
    gateway.fake.behaviours[PRIMARY] = by_model(m1=limited, m2=limited)

    async def stop_during_the_wait(seconds: float) -> None:
        signal.set()
        await asyncio.Event().wait()  # the wait ends only when the stop cancels it

    monkeypatch.setattr(proxy_clock, "pause", stop_during_the_wait)
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat("duo", stream=True))
    reply = await read_reply(comm)

    assert reply.status == 200
    assert reply.body == KEEP_ALIVE + SHUTTING_DOWN_EVENT + DONE_EVENT


async def test_a_stream_whose_head_has_not_gone_out_gets_a_503(
    gateway: Gateway, primary: int, signal: stopping.ShuttingDown
) -> None:
    asked = asyncio.Event()

    async def never_answering(request: httpx.Request) -> httpx.Response:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    gateway.fake.behaviours[PRIMARY] = never_answering
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat(stream=True))
    await asyncio.wait_for(asked.wait(), RECEIVE_TIMEOUT_SECONDS)

    signal.set()

    reply = await read_reply(comm)
    assert reply.status == 503
    assert reply.json()["error"]["code"] == "server_shutting_down"


async def test_a_plain_request_in_flight_is_left_to_finish(
    gateway: Gateway, primary: int, signal: stopping.ShuttingDown
) -> None:
    asked, release = asyncio.Event(), asyncio.Event()
    completion = {"id": "c1", "object": "chat.completion", "model": "m1", "choices": []}
    answering = answer(200, orjson.dumps(completion))

    async def slow(request: httpx.Request) -> httpx.Response:
        asked.set()
        await release.wait()
        return await answering(request)

    gateway.fake.behaviours[PRIMARY] = slow
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat())
    await asyncio.wait_for(asked.wait(), RECEIVE_TIMEOUT_SECONDS)

    signal.set()
    release.set()

    reply = await read_reply(comm)
    assert reply.status == 200 and reply.json()["id"] == "c1"


async def test_a_request_arriving_once_the_stop_began_gets_a_503_in_its_api_shape(
    gateway: Gateway, primary: int, signal: stopping.ShuttingDown
) -> None:
    signal.set()

    reply = await ask(gateway)

    assert reply.status == 503
    assert reply.json()["error"]["code"] == "server_shutting_down"
    assert gateway.fake.requests == []  # no work was started
