"""One upstream stream read event by event (``routing.proxy.streams``), without the consumer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from routing.domain.attempts.outcomes import OutcomeKind
from routing.proxy.stream_clock import ClientDeadline
from routing.proxy.streams import EVENT_TOO_LARGE, STREAM_IDLE, StreamBroken, UpstreamStream

TOKEN = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
FINISH = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"


class Armed:
    """A watchdog that aborts every event it sees once armed."""

    def __init__(self) -> None:
        self.armed = False
        self.seen = 0

    def observe(self, useful: int, protected: bool, now: float) -> bool:
        self.seen += 1
        return self.armed


async def body(*chunks: bytes) -> AsyncIterator[bytes]:
    for part in chunks:
        yield part


async def relayed(stream: UpstreamStream) -> list[bytes]:
    return [part async for part in stream.relay()]


async def test_the_watchdog_never_judges_a_finished_answer() -> None:
    watchdog = Armed()
    stream = UpstreamStream(TOKEN, body(FINISH, DONE), watchdog)  # type: ignore[arg-type]
    assert await stream.head() == TOKEN
    watchdog.armed = True

    assert await relayed(stream) == [FINISH, DONE]


async def test_the_watchdog_aborts_an_unfinished_answer_after_relaying_the_event() -> None:
    watchdog = Armed()
    stream = UpstreamStream(TOKEN, body(TOKEN, FINISH, DONE), watchdog)  # type: ignore[arg-type]
    await stream.head()
    watchdog.armed = True
    parts: list[bytes] = []

    with pytest.raises(StreamBroken) as broken:
        async for part in stream.relay():
            parts.append(part)

    assert parts == [TOKEN]  # the event that tripped it was sent, and counted as sent
    assert broken.value.kind is OutcomeKind.TIMEOUT and "".join(stream.state.text) == "aa"


async def test_whole_chunks_are_relayed_as_they_came_and_split_events_once_complete() -> None:
    stream = UpstreamStream(TOKEN, body(TOKEN + FINISH[:20], FINISH[20:], DONE))
    await stream.head()

    assert await relayed(stream) == [TOKEN, FINISH, DONE]


async def test_an_in_band_error_after_text_relays_the_text_first() -> None:
    error = b"data: " + orjson.dumps({"error": {"message": "overloaded"}}) + b"\n\n"
    stream = UpstreamStream(TOKEN, body(TOKEN + error))
    await stream.head()
    parts: list[bytes] = []

    with pytest.raises(StreamBroken) as broken:
        async for part in stream.relay():
            parts.append(part)

    assert parts == [TOKEN] and broken.value.kind is OutcomeKind.HTTP_ERROR
    assert b"overloaded" in broken.value.body


# --- one event over the limit -----------------------------------------------------------------


async def test_an_event_over_the_limit_before_the_first_token_fails_the_attempt() -> None:
    huge = b'data: {"padding": "' + b"x" * 4096 + b'"}\n\n'
    stream = UpstreamStream(
        huge[:1000], body(huge[1000:3000], huge[3000:], TOKEN), max_event_bytes=2048
    )

    with pytest.raises(StreamBroken) as broken:
        await stream.head()

    assert broken.value.kind is OutcomeKind.HTTP_ERROR and broken.value.detail == EVENT_TOO_LARGE
    assert orjson.loads(broken.value.body)["error"]["code"] == "upstream_response_too_large"
    assert broken.value.outcome().status == 502


async def test_an_event_over_the_limit_after_commit_breaks_the_stream_after_what_came_first() -> (
    None
):
    huge = b'data: {"padding": "' + b"x" * 4096 + b'"}\n\n'
    stream = UpstreamStream(
        TOKEN, body(TOKEN + huge[:100], huge[100:], FINISH, DONE), max_event_bytes=2048
    )
    await stream.head()
    parts: list[bytes] = []

    with pytest.raises(StreamBroken) as broken:
        async for part in stream.relay():
            parts.append(part)

    assert parts == [TOKEN] and broken.value.detail == EVENT_TOO_LARGE


# --- the idle limit after commit --------------------------------------------------------------

PING = b": ping\n\n"
EMPTY = b'data: {"choices": [{"index": 0, "delta": {"content": ""}}]}\n\n'


async def paced(seconds: float, *chunks: bytes, then: bytes | None = None) -> AsyncIterator[bytes]:
    """``chunks`` one every ``seconds``, then ``then`` (if any) every ``seconds`` for good."""
    for part in chunks:
        await asyncio.sleep(seconds)
        yield part
    while then is not None:
        await asyncio.sleep(seconds)
        yield then


@pytest.mark.parametrize("keepalive", [PING, EMPTY], ids=["comment", "empty-delta"])
async def test_keepalives_after_the_first_token_do_not_hold_the_idle_limit_off(
    keepalive: bytes,
) -> None:
    stream = UpstreamStream(TOKEN, paced(0.01, then=keepalive), idle_seconds=0.2)
    await stream.head()
    started = time.monotonic()
    parts: list[bytes] = []

    with pytest.raises(StreamBroken) as broken:
        async with asyncio.timeout(2):
            async for part in stream.relay():
                parts.append(part)

    assert broken.value.kind is OutcomeKind.TIMEOUT and broken.value.detail == STREAM_IDLE
    assert 0.2 <= time.monotonic() - started < 0.5 and set(parts) == {keepalive}


async def test_answer_events_restart_the_idle_limit() -> None:
    reasoning = b'data: {"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}]}\n\n'
    usage = b'data: {"choices": [], "usage": {"total_tokens": 3}}\n\n'
    # every 0.15 s something that changes the answer, pings between: 0.6 s in all
    answer = (PING, TOKEN, PING, reasoning, PING, FINISH, PING, usage, DONE)
    stream = UpstreamStream(TOKEN, paced(0.075, *answer), idle_seconds=0.2)
    await stream.head()

    assert await relayed(stream) == list(answer)


async def test_a_client_reading_slowly_does_not_make_the_upstream_idle() -> None:
    stream = UpstreamStream(TOKEN, body(PING, TOKEN, FINISH, DONE), idle_seconds=0.1)
    await stream.head()
    parts: list[bytes] = []

    async for part in stream.relay():
        parts.append(part)
        await asyncio.sleep(0.15)  # the client's back-pressure, not the upstream's silence

    assert parts == [PING, TOKEN, FINISH, DONE]


async def test_the_client_deadline_ends_the_reads_of_a_stream_that_keeps_answering() -> None:
    stream = UpstreamStream(TOKEN, paced(0.02, then=TOKEN), idle_seconds=10)
    await stream.head()
    stream.clock.deadline_at = time.monotonic() + 0.2

    with pytest.raises(ClientDeadline):
        async with asyncio.timeout(2):
            async for _ in stream.relay():
                pass


async def test_a_cancellation_from_outside_is_not_taken_for_the_idle_limit() -> None:
    stream = UpstreamStream(TOKEN, paced(10, TOKEN), idle_seconds=0.1)
    await stream.head()
    reading = asyncio.ensure_future(relayed(stream))
    await asyncio.sleep(0.05)
    reading.cancel()

    with pytest.raises(asyncio.CancelledError):
        await reading
