"""A proxied request leaves no reference cycles behind: what it allocated is freed by reference
counting as it ends, so the collector has nothing of it to trace (docs/architecture.md, "One
request"). Channels' own dispatch loop left about 32 objects in cycles per plain request and
66 per stream (a receive task, its wait and the exceptions that ended them); then the task that
watched for the client leaving kept each consumer alive past its request, to become a cycle
of it and what the request built (its exchange, the context's keep-alive, the stream's
relay)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from routing.proxy.shell import ProxyConsumer
from tests.routing.harness import OK, PRIMARY, FakeWriter, Gateway, chat

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


def consumers() -> list[ProxyConsumer]:
    """The /v1 consumers alive or left to the collector (by type: a weak proxy among the
    collector's objects raises on ``isinstance``)."""
    return [obj for obj in gc.get_objects() if issubclass(type(obj), ProxyConsumer)]


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
    assert await gateway.drive(body, 3) == [200] * 3  # warm: snapshot and pools built
    gc.collect()
    earlier = {id(consumer) for consumer in consumers()}  # other tests' (none when run alone)
    answered = await gateway.drive(body, REQUESTS)
    # Each consumer is freed as its request ends, by reference counting alone: none is left
    # alive (by a task still to finish) to become cyclic garbage later, out of this count.
    left = [consumer for consumer in consumers() if id(consumer) not in earlier]
    found = gc.collect()
    assert answered == [200] * REQUESTS
    assert left == []
    # Fewer than one object in a cycle per request: nothing per request is left to the collector.
    assert found < REQUESTS, f"{found} objects in cycles after {REQUESTS} requests"
