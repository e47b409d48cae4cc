"""Streams over real HTTP with the official ``openai`` SDK as the client: limits before the
first token, and after commit a cut or a stall is finished (prefill continuation or
regenerate-and-splice) or ended honestly, never duplicated."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import openai
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content, tokens
from tests.conftest import free_port
from tests.e2e.conftest import ROOT, Gateway, Route, make_route, records

pytestmark = pytest.mark.e2e
T = TypeVar("T")

CHUNKS, SIZE = 12, 8
WHOLE = content(CHUNKS * SIZE)  # what every healthy target of these tests answers
SHAPE = {"chunks": CHUNKS, "chunk_size": SIZE, "chunk_interval_ms": 20}
CUT = {**SHAPE, "cut": "mid", "mid_at": 5}
STALL = {**SHAPE, "stall": "mid", "mid_at": 5}  # longer than the e2e idle limit (1.5 s)


def sdk(gateway: Gateway, route: Route) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=route.key, max_retries=0)


def stream_text(gateway: Gateway, route: Route, **extra: Any) -> tuple[str, list[Any]]:
    """The text the SDK assembles from a streamed answer, and its chunks."""
    chunks = list(
        sdk(gateway, route).chat.completions.create(
            model=route.model(),
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            **extra,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def raw_stream(
    gateway: Gateway, route: Route, headers: dict[str, str] | None = None, within: float = 30
) -> httpx.Response:
    """The whole streamed answer, which must end ``within`` seconds (keep-alives that keep
    every read short do not make it last longer)."""
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    ends = time.monotonic() + within
    with gateway.client(route.key, timeout=within) as client:
        parts = []
        with client.stream("POST", "/chat/completions", json=body, headers=headers) as response:
            for part in response.iter_bytes():
                parts.append(part)
                assert time.monotonic() < ends, f"the stream went on past {within} s"
        content = b"".join(parts)
        return httpx.Response(response.status_code, headers=response.headers, content=content)


def sse_text(response: httpx.Response) -> str:
    text = []
    for line in response.text.splitlines():
        data = line.removeprefix("data: ")
        if line.startswith("data: ") and data != "[DONE]":
            for choice in orjson.loads(data).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def catalog(gateway: Gateway, route: Route, **fields: Any) -> None:
    gateway.post("/api/model-catalog/", {"provider": route.provider, "model": "gpt-test", **fields})


@contextmanager
def resilience(gateway: Gateway, patch: dict[str, Any]) -> Iterator[None]:
    """Resilience settings changed for the block, then put back."""
    before = gateway.api.get("/api/resilience").json()
    assert gateway.api.patch("/api/resilience", json=patch).status_code == 200
    try:
        yield
    finally:
        assert gateway.api.patch("/api/resilience", json=before).status_code == 200


def prefills(fake: FakeUpstream, route: Route, connection: int) -> list[str]:
    """The assistant prefills the n-th connection was sent."""
    return [
        r.body["messages"][-1]["content"]
        for r in records(fake, route, connection)
        if r.body["messages"][-1]["role"] == "assistant"
    ]


# --- before the first token -------------------------------------------------------------------


def test_a_silent_upstream_is_tried_once_and_the_next_answers(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"stall": "before"}, SHAPE)
    started = time.monotonic()

    text, _ = stream_text(gateway, route)

    assert text == WHOLE
    assert len(records(fake, route, 1)) == 1
    assert time.monotonic() - started < 5  # the 1.5 s idle limit, not the 60 s first-token one


def test_a_first_token_slower_than_its_limit_fails_over_before_any_byte(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    slow = {**SHAPE, "latency_ms": 1000, "chunk_interval_ms": 500}  # headers after 1 s
    route = make_route(gateway, fake, slow, SHAPE)
    catalog(gateway, route, time_to_first_token_ms=1000)

    response = raw_stream(gateway, route)

    assert response.status_code == 200
    assert f"connection={route.connections[1]}" in response.headers["x-omniroute-decision"]
    assert sse_text(response) == WHOLE and "error" not in response.text


def test_three_silent_targets_and_a_ten_second_deadline_answer_504_in_time(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    silent = {"stall": "before"}
    route = make_route(gateway, fake, silent, silent, silent)
    catalog(gateway, route, time_to_first_token_ms=600_000, stream_idle_ms=600_000)
    started = time.monotonic()

    response = raw_stream(gateway, route, {"x-omniroute-deadline-ms": "10000"})

    assert response.status_code == 504
    assert response.json()["error"]["code"] == "request_deadline_exceeded"
    assert time.monotonic() - started < 11


# --- after commit: a cut or a stall -----------------------------------------------------------


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_broken_stream_is_continued_on_a_prefill_accepting_target(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "prefill": "accept"})
    catalog(gateway, route, accepts_prefill="yes")

    text, chunks = stream_text(gateway, route)

    assert text == WHOLE  # the whole answer, exactly once
    assert len({c.id for c in chunks}) == 1  # one stream as the client sees it
    assert prefills(fake, route, 2) == [WHOLE[: 5 * SIZE]]


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_broken_stream_is_completed_by_regeneration_without_any_prefill(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "prefill": "reject"})
    catalog(gateway, route, accepts_prefill="no")

    text, _ = stream_text(gateway, route)

    assert text == WHOLE
    assert prefills(fake, route, 2) == []
    assert len(records(fake, route, 2)) == 1


@pytest.mark.parametrize("failure", [CUT, STALL], ids=["cut", "stall"])
def test_a_regeneration_that_differs_ends_with_an_error_event_and_no_done(
    gateway: Gateway, fake: FakeUpstream, failure: dict[str, Any]
) -> None:
    route = make_route(gateway, fake, failure, {**SHAPE, "text": "alt"})

    response = raw_stream(gateway, route)

    assert response.status_code == 200
    assert sse_text(response) == WHOLE[: 5 * SIZE]  # nothing of the other answer
    last = response.text.strip().splitlines()[-1]
    assert orjson.loads(last.removeprefix("data: "))["error"]["code"] == (
        "upstream_stream_interrupted"
    )
    assert "[DONE]" not in response.text


# --- after commit: idle, and the client's deadline ---------------------------------------------

TRICKLE = {**SHAPE, "stall": "mid", "mid_at": 1, "heartbeat_ms": 200}  # a token, then pings


def in_band_error(response: httpx.Response) -> dict[str, Any]:
    last = response.text.strip().splitlines()[-1]
    return dict(orjson.loads(last.removeprefix("data: "))["error"])


def test_a_committed_stream_sending_only_comments_ends_at_its_idle_limit(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, TRICKLE)
    catalog(gateway, route, stream_idle_ms=1000)
    started = time.monotonic()

    with resilience(gateway, {"streamRecovery": {"continueMidStream": False}}):
        response = raw_stream(gateway, route, within=5)

    assert 1 <= time.monotonic() - started < 2.5
    assert sse_text(response) == WHOLE[:SIZE] and ": ping" in response.text
    error = in_band_error(response)
    assert error["code"] == "upstream_stream_interrupted" and "stream idle" in error["message"]
    assert "[DONE]" not in response.text


def test_a_client_deadline_ends_a_committed_stream_in_band(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # 2 s rather than 10 s, ended by 3 s rather than 11 s: the same rule, sooner
    route = make_route(gateway, fake, TRICKLE)
    catalog(gateway, route, stream_idle_ms=600_000)  # only the client's deadline can end it
    started = time.monotonic()

    response = raw_stream(gateway, route, {"x-omniroute-deadline-ms": "2000"}, within=6)

    assert time.monotonic() - started < 3
    assert response.status_code == 200 and sse_text(response) == WHOLE[:SIZE]
    assert in_band_error(response)["code"] == "request_deadline_exceeded"
    assert "[DONE]" not in response.text


LONG = {"chunks": 16, "chunk_size": SIZE, "chunk_interval_ms": 250}  # about 4 s


@pytest.mark.parametrize(
    "first", [LONG, {**LONG, "cut": "mid", "mid_at": 8}], ids=["healthy", "cut-after-2s"]
)
def test_the_default_deadline_never_cuts_a_committed_stream(
    gateway: Gateway, fake: FakeUpstream, first: dict[str, Any]
) -> None:
    # the default deadline at 1 s, a stream of 4 s: healthy, or cut after 2 s and finished on
    # the next target
    route = make_route(gateway, fake, first, LONG)

    with resilience(gateway, {"attempts": {"deadlineMs": 1000}}):
        response = raw_stream(gateway, route, within=15)

    assert sse_text(response) == content(16 * SIZE)
    assert response.text.rstrip().endswith("data: [DONE]") and "error" not in response.text


# --- upstream quirks --------------------------------------------------------------------------


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
