"""A proxied request leaves no reference cycles behind: what it allocated is freed by reference
counting as it ends, so the collector has nothing of it to trace (docs/architecture.md, "One
request"). Channels' own dispatch loop left about 32 objects in cycles per plain request and
66 per stream (a receive task, its wait and the exceptions that ended them)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.routing.harness import OK, PRIMARY, FakeWriter, Gateway, chat, http_scope

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTS = 50
SSE = {"content-type": "text/event-stream"}
EVENTS = [
    b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


async def streamed(request: httpx.Request) -> httpx.Response:
    async def events() -> AsyncIterator[bytes]:
        for event in EVENTS:
            yield event

    return httpx.Response(200, headers=SSE, content=events())


async def drive(gateway: Gateway, body: bytes, count: int) -> list[int]:
    """``count`` requests straight through the ASGI application (no test communicator, whose
    own tasks would be counted too); the statuses answered."""
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    for _ in range(count):
        received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        received.put_nowait({"type": "http.request", "body": body, "more_body": False})
        await gateway.app(http_scope(gateway.key), received.get, send)
    return statuses


@pytest.fixture
def collector_paused() -> Iterator[None]:
    """The cyclic collector off (it would free the cycles before they are counted), and on
    again afterwards, whatever happened."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_request_leaves_no_cycles_for_the_collector(
    gateway: Gateway,
    primary: int,
    request_log: FakeWriter,  # kept in memory: no writer thread's work is counted
    stream: bool,
    collector_paused: None,
) -> None:
    gateway.fake.behaviours[PRIMARY] = streamed if stream else OK
    body = chat(stream=stream)
    assert await drive(gateway, body, 3) == [200] * 3  # warm: snapshot and pools built
    gc.collect()
    answered = await drive(gateway, body, REQUESTS)
    found = gc.collect()
    assert answered == [200] * REQUESTS
    # Fewer than one object in a cycle per request: nothing per request is left to the collector.
    assert found < REQUESTS, f"{found} objects in cycles after {REQUESTS} requests"
