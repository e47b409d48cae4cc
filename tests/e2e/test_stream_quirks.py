"""Streams whose upstream gets what it sends wrong, over real HTTP: one huge event, a
malformed one, a missing ``[DONE]``, a stream that says nothing or too little (the throughput
watchdog), the usage block a client did not ask for, and a connection that stalled."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar
from urllib.parse import urlencode

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content, tokens
from tests.conftest import free_port
from tests.e2e.conftest import ROOT, Gateway, Route, make_route, records
from tests.e2e.stream_support import (
    CHUNKS,
    SHAPE,
    STALL,
    WHOLE,
    raw_stream,
    resilience,
    sse_text,
    stream_text,
)

pytestmark = pytest.mark.e2e
T = TypeVar("T")


@pytest.fixture(scope="module")
def fake_elsewhere() -> Iterator[str]:
    """The URL of another fake upstream, in a process of its own: the huge answers it writes
    take no time from this process's clients, whose requests are timed."""
    port = free_port()
    serve = "import asyncio, sys; from omniroute.tools.fakeupstream import FakeUpstream; "
    serve += "asyncio.run(FakeUpstream(port=int(sys.argv[1]), record=False).serve_forever())"
    process = subprocess.Popen([sys.executable, "-c", serve, str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(f"{url}/_fake/stats", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_one_huge_event_fails_the_attempt_fast_and_stalls_no_other_client(
    gateway: Gateway, fake: FakeUpstream, fake_elsewhere: str
) -> None:
    huge = urlencode({**SHAPE, "big_event_bytes": 24 * 1024 * 1024})  # one 24 MiB event first
    other = make_route(gateway, fake, SHAPE)
    slowest: list[float] = []
    for _ in range(3):  # a busy machine can delay one request; a blocked gateway delays each
        elsewhere = [{"base_url": f"{fake_elsewhere}/s/{huge}/v1"}]  # the first connection's
        route = make_route(gateway, fake, SHAPE, SHAPE, connection_fields=elsewhere)
        started = time.monotonic()
        stream = functools.partial(raw_stream, gateway, route)
        response, plain = alongside(gateway, other, stream)
        ended = time.monotonic()

        meanwhile = [end - start for start, end in plain if start < ended and end > started]
        slowest.append(max(meanwhile))
        assert ended - started < 3, (ended - started, slowest)  # the attempts failed fast
        assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
        assert sse_text(response) == WHOLE and "padding" not in response.text
        if slowest[-1] < 0.1:
            return
    raise AssertionError(f"a plain request took {slowest} s while a huge event was read")


def alongside(
    gateway: Gateway, route: Route, work: Callable[[], T]
) -> tuple[T, list[tuple[float, float]]]:
    """What ``work`` returns, and when each plain request another client made through the
    gateway meanwhile started and ended (``time.monotonic``)."""
    body = {"model": route.model(), "messages": [{"role": "user", "content": "x"}]}
    times: list[tuple[float, float]] = []
    warm, done = threading.Event(), threading.Event()

    def ask() -> None:
        with gateway.client(route.key) as client:
            assert client.post("/chat/completions", json=body).status_code == 200
            warm.set()
            while not done.is_set():
                started = time.monotonic()
                assert client.post("/chat/completions", json=body).status_code == 200
                times.append((started, time.monotonic()))

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        assert warm.wait(10)
        return work(), times
    finally:
        done.set()
        asker.join()


def test_a_malformed_event_is_dropped_and_the_text_arrives_whole(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {**SHAPE, "malformed_at": 4})

    text, _ = stream_text(gateway, route)

    assert text == WHOLE


def test_the_upstream_is_asked_for_usage_that_only_a_client_that_asked_gets(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, SHAPE)

    raw = raw_stream(gateway, route)  # the bytes as relayed, to a client that did not ask
    text, chunks = stream_text(gateway, route)  # the openai SDK, not asking either
    asked_text, asked = stream_text(gateway, route, stream_options={"include_usage": True})

    sent = [r.body.get("stream_options") for r in records(fake, route)]
    assert sent == [{"include_usage": True}] * 3
    assert b'"usage"' not in raw.content and raw.content.endswith(b"data: [DONE]\n\n")
    assert sse_text(raw) == text == asked_text == WHOLE
    assert all(chunk.usage is None for chunk in chunks)
    usage = asked[-1].usage
    assert asked[-1].choices == [] and usage is not None
    assert usage.completion_tokens == tokens(len(WHOLE))


def test_a_missing_done_finishes_within_a_second_with_usage(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {**SHAPE, "done": "hang"})
    started = time.monotonic()

    text, chunks = stream_text(gateway, route, stream_options={"include_usage": True})

    finished = time.monotonic() - started
    assert text == WHOLE
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert finished < CHUNKS * 0.02 + 1.0


WATCHDOG = {
    "streamRecovery": {
        "throughputWatchdog": {
            "enabled": True,
            "warmupMs": 0,
            "windowMs": 1000,
            "minUsefulBytesPerSecond": 4,
        }
    }
}


def test_a_stream_saying_nothing_is_aborted_by_the_watchdog_and_recovered_unseen(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # headers, then only heartbeats: the idle limit never fires, the watchdog does
    pings = {**SHAPE, "stall": "mid", "mid_at": 0, "heartbeat_ms": 200}
    route = make_route(gateway, fake, pings, SHAPE)

    with resilience(gateway, WATCHDOG):
        response = raw_stream(gateway, route)

    assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
    assert sse_text(response) == WHOLE and "error" not in response.text


def test_a_slow_stream_is_aborted_by_the_watchdog_and_finished_elsewhere(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    slow = {"chunks": 6, "chunk_size": 1, "chunk_interval_ms": 600}  # ~1.7 useful bytes/s
    route = make_route(gateway, fake, slow, {"chunks": 6, "chunk_size": 1})

    with resilience(gateway, WATCHDOG):
        response = raw_stream(gateway, route)

    assert sse_text(response) == content(6)
    assert response.text.rstrip().endswith("data: [DONE]")
    assert len(records(fake, route, 2)) == 1


def test_a_stream_of_reasoning_only_is_not_aborted(gateway: Gateway, fake: FakeUpstream) -> None:
    slow = {"chunks": 4, "chunk_size": 1, "chunk_interval_ms": 600, "reasoning": True}
    route = make_route(gateway, fake, slow, SHAPE)

    with resilience(gateway, WATCHDOG):
        response = raw_stream(gateway, route)

    assert "reasoning_content" in response.text
    assert response.text.rstrip().endswith("data: [DONE]")
    assert records(fake, route, 2) == []


def test_a_connection_that_stalled_is_never_reused(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, SHAPE)
    clean = reused_after_clean_streams(gateway, fake, route)
    fake.script({**STALL})  # the next answer stalls after 5 chunks: the idle limit cuts it

    text, _ = stream_text(gateway, route)  # regenerated on the same (only) target
    assert text == WHOLE
    assert stream_text(gateway, route)[0] == WHOLE

    stalled, regenerated, after = records(fake, route, 1)[clean:]
    assert stalled.behaviour.stall == "mid"
    assert stalled.peer not in (regenerated.peer, after.peer)


def reused_after_clean_streams(gateway: Gateway, fake: FakeUpstream, route: Route) -> int:
    """Stream until the pool hands a connection that finished cleanly to a later request (a
    request can start before the previous stream's connection is back in the pool, so the
    very next one may open a new connection); the number of clean streams it took."""
    for count in range(1, 11):
        assert stream_text(gateway, route)[0] == WHOLE
        peers = [r.peer for r in records(fake, route, 1)]
        if peers[-1] in peers[:-1]:
            return count
    raise AssertionError(f"10 clean streams never reused a pooled connection: {peers}")
