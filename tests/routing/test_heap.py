"""The relay's Python heap after 500 streams returns to where it started (issue 15).

The chat consumer runs in this process over an upstream that streams a whole answer, on a store
with the real clock, as a gateway process does. After a warm-up batch (caches, the snapshot,
first-use imports, the bounded buffer of first-token samples and its shared copy in the
store, which a process writes at most every few seconds, so the test writes it itself at both
measurements) the heap that ``tracemalloc`` sees is measured, 500 streams go through, the
background writes settle and a collection runs: the heap must be back within
``HEAP_GROWTH_BOUND_BYTES`` of its start. One small dict kept per stream (about 230 B) would add
115 kB and fail it; what remains here is 20-40 kB, mostly bounded caches such as
CPython's type attribute cache, which holds each looked-up handler name (4096 entries at most).
"""

from __future__ import annotations

import gc
import logging
import tracemalloc
from collections.abc import Iterator

import httpx
import orjson
import pytest

from omniroute.core import tasks
from omniroute.core.store import MemoryStore
from resilience.services.housekeeping import housekeeping_settle
from routing.proxy.consumers import ChatCompletionsConsumer, attempt_loop
from routing.proxy.hedging import Hedging
from routing.proxy.upstream.client import Upstream
from tests.routing.harness import (
    ACME_MODEL,
    chat,
    chunks_of,
    communicator,
    read_reply,
    send_body,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.reliability]

# More than the 200 first-token samples kept per model (routing.domain.attempts.hedging), so that
# this
# bounded buffer is full before the heap is measured.
WARM_UP_STREAMS = 250
STREAMS = 500
HEAP_GROWTH_BOUND_BYTES = 64 * 1024
TOP_GROWTH_LINES = 8  # shown when the bound is passed: where the heap grew


def _event(delta: dict[str, str], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    payload = {"id": "chatcmpl-heap", "object": "chat.completion.chunk", "model": "m1"}
    return b"data: " + orjson.dumps({**payload, "choices": [choice]}) + b"\n\n"


ANSWER = [
    _event({"role": "assistant", "content": ""}),
    *(_event({"content": f"word{i} "}) for i in range(20)),
    _event({}, "stop"),
    b"data: [DONE]\n\n",
]


async def streamed(request: httpx.Request) -> httpx.Response:
    """The whole answer as an event stream; nothing about the request is kept."""
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=chunks_of(ANSWER)
    )


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


async def _streams(app: object, key: str, count: int) -> None:
    for _ in range(count):
        comm = communicator(app, key)
        await send_body(comm, chat(ACME_MODEL, stream=True))
        reply = await read_reply(comm)
        assert reply.status == 200 and reply.body.endswith(b"data: [DONE]\n\n")
        assert reply.body.count(b"word") == 20


async def _settled_heap(hedger: Hedging) -> int:
    await hedger.share()  # the shared copy of the first-token samples, full at both points
    await tasks.flush()
    await housekeeping_settle()
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def test_500_streams_leave_the_heap_where_it_started(
    fresh_snapshot: None,
    primary: int,
    plain_key: str,
    caplog: pytest.LogCaptureFixture,
    traced: None,
) -> None:
    # The test's log capture keeps every access record it sees (a heap of the test's, not the
    # gateway's, which writes the line to stderr and keeps nothing): the access log stays quiet.
    caplog.set_level(logging.WARNING, logger="omniroute.access")
    store, upstream = MemoryStore(), Upstream(httpx.MockTransport(streamed))
    app = ChatCompletionsConsumer.as_asgi(upstream=upstream, store=store)
    await _streams(app, plain_key, WARM_UP_STREAMS)
    hedger = attempt_loop(upstream, store).hedger
    assert isinstance(hedger, Hedging)
    before = await _settled_heap(hedger)
    start = tracemalloc.take_snapshot()

    await _streams(app, plain_key, STREAMS)

    growth = await _settled_heap(hedger) - before
    if growth >= HEAP_GROWTH_BOUND_BYTES:
        stats = tracemalloc.take_snapshot().compare_to(start, "lineno")[:TOP_GROWTH_LINES]
        pytest.fail(f"the heap grew by {growth} B:\n" + "\n".join(map(str, stats)))
