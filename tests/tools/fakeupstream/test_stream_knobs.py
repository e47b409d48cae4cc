"""The fake upstream's knobs for broken and unusual streams (no Django models, no DB): where a
mid-stream fault happens (``mid_at``), a malformed or oversized event, a missing ``[DONE]``,
reasoning-only deltas, the alternative text and heartbeats during a stall.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import Behaviour, FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.tools.fakeupstream.support import (
    CHANNELS,
    deltas,
    last,
    post,
    read_until,
    request_parts,
    sse_data,
    text_of,
)

MALFORMED = '{"choices": ['

# ------------------------------------------------------------------------------ mid_at


@pytest.mark.parametrize("channel", CHANNELS)
async def test_mid_at_places_a_cut(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    resp = await post(client, fake, channel, {"cut": "mid", "mid_at": 5}, stream=True)
    events = sse_data(resp.text)
    assert len(events) == 5 and "[DONE]" not in events
    assert text_of(events) == content(40)


async def test_mid_at_zero_resets_before_any_content(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    parts = request_parts(fake, "header", {"reset": "mid", "mid_at": 0}, {"stream": True})
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await read_until(client, parts, lambda lines: False)
    assert last(fake).chunks_sent == 0 and last(fake).aborted_at is not None


async def test_mid_at_beyond_the_chunks_stalls_before_the_finish(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    knobs = {"stall": "mid", "mid_at": 50, "chunks": 3}
    lines, timed_out = await read_until(
        client, request_parts(fake, "model", knobs, {"stream": True}), lambda lines: False
    )
    events = sse_data("\n".join(lines))
    assert timed_out and len(events) == 3
    assert all(d.get("content") for d in deltas(events))


# ------------------------------------------------------------------------------ malformed_at


@pytest.mark.parametrize("interval", [0, 5])
async def test_malformed_event_before_chunk_k(
    fake: FakeUpstream, client: httpx.AsyncClient, interval: int
) -> None:
    knobs = {"malformed_at": 2, "chunks": 4, "chunk_interval_ms": interval}
    resp = await post(client, fake, "header", knobs, stream=True)
    events = sse_data(resp.text)
    assert events[2] == MALFORMED and events[-1] == "[DONE]"
    rest = events[:2] + events[3:]
    assert text_of(rest) == content(32) and len(rest) == 6  # 4 content, finish, [DONE]
    assert fake.stats["failed"] == 1


async def test_malformed_at_past_the_content_comes_before_the_finish(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, "script", {"malformed_at": 9, "chunks": 2}, stream=True)
    events = sse_data(resp.text)
    assert events[2] == MALFORMED
    assert orjson.loads(events[3])["choices"][0]["finish_reason"] == "stop"


# ------------------------------------------------------------------------------ big_event_bytes


@pytest.mark.parametrize("interval", [0, 5])
async def test_one_big_event_comes_before_the_first_content_chunk(
    fake: FakeUpstream, client: httpx.AsyncClient, interval: int
) -> None:
    knobs = {"big_event_bytes": 100_000, "chunks": 2, "chunk_interval_ms": interval}
    resp = await post(client, fake, "header", knobs, stream=True)
    raw = resp.content.split(b"\n\n")
    assert len(raw[0]) + 2 == 100_000 and orjson.loads(raw[0][6:]) == {"padding": "x" * 99_977}
    events = sse_data(resp.text)[1:]
    assert text_of(events) == content(16) and events[-1] == "[DONE]"
    assert fake.stats["failed"] == 1


async def test_a_big_event_is_at_least_its_frame(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, "model", {"big_event_bytes": 0, "chunks": 1}, stream=True)
    assert resp.content.startswith(b'data: {"padding": ""}\n\n')


async def test_a_big_event_on_the_other_routes(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    messages = fake.anthropic_base_url(big_event_bytes=64) + "/v1/messages"
    for url in (messages, fake.base_url(big_event_bytes=64) + "/responses"):
        body = {"model": "m", "stream": True, "max_tokens": 8, "input": "x", "messages": []}
        resp = await client.post(url, json=body)
        events = resp.content.split(b"\n\n")
        big = next(i for i, e in enumerate(events) if b"padding" in e)
        first_delta = next(i for i, e in enumerate(events) if b"delta" in e)
        assert len(events[big]) + 2 == 64 and 0 < big < first_delta  # after the head events


# ------------------------------------------------------------------------------ done


async def test_done_close_ends_after_finish_and_usage(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    usage = {"include_usage": True}
    resp = await post(client, fake, "model", {"done": "close"}, stream=True, stream_options=usage)
    events = sse_data(resp.text)
    assert "[DONE]" not in events and len(events) == 22
    assert orjson.loads(events[-1])["usage"]["completion_tokens"] == 40
    assert orjson.loads(events[-2])["choices"][0]["finish_reason"] == "stop"


async def test_done_hang_keeps_the_connection_open(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    parts = request_parts(fake, "header", {"done": "hang", "chunks": 2}, {"stream": True})
    lines, timed_out = await read_until(client, parts, lambda lines: False)
    events = sse_data("\n".join(lines))
    assert timed_out and "[DONE]" not in events and len(events) == 3
    assert await fake.wait_for_async(lambda f: last(f).disconnected_at, timeout=1.0)
    assert not last(fake).completed and last(fake).pings_sent == 0


async def test_bad_done_is_400(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "header", {"done": "maybe"}, stream=True)
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "fake_knob_error"


# ------------------------------------------------------------------------------ reasoning, text


@pytest.mark.parametrize("flag", ["true", "1", "yes"])
async def test_reasoning_stream_carries_only_reasoning_deltas(
    fake: FakeUpstream, client: httpx.AsyncClient, flag: str
) -> None:
    resp = await post(client, fake, "header", {"reasoning": flag, "chunks": 3}, stream=True)
    pieces = deltas(sse_data(resp.text))
    assert all("content" not in p for p in pieces)
    assert "".join(p.get("reasoning_content", "") for p in pieces) == content(24)
    assert pieces[0]["role"] == "assistant" and pieces[-1] == {}


async def test_reasoning_completion(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "model", {"reasoning": "true", "chunks": 2})
    message = resp.json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": None, "reasoning_content": content(16)}


@pytest.mark.parametrize("channel", CHANNELS)
async def test_alt_text_differs_and_is_deterministic(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    texts = [
        text_of(sse_data((await post(client, fake, channel, {"text": "alt"}, stream=True)).text))
        for _ in range(2)
    ]
    assert texts[0] == texts[1] == content(160, "alt")
    assert texts[0][0] != content(160)[0]
    plain = (await post(client, fake, channel, {"text": "alt"})).json()
    assert plain["choices"][0]["message"]["content"] == texts[0]


# ------------------------------------------------------------------------------ heartbeat_ms


async def test_heartbeats_during_a_mid_stall(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    knobs = {"stall": "mid", "chunks": 4, "heartbeat_ms": 10}
    parts = request_parts(fake, "header", knobs, {"stream": True})
    lines, timed_out = await read_until(client, parts, lambda ls: ls.count(": ping") >= 3)
    assert not timed_out  # the pings keep the read alive
    assert len(sse_data("\n".join(lines))) == 2 and lines[-1] == ": ping"
    assert last(fake).chunks_sent == 2 and last(fake).pings_sent >= 3


async def test_heartbeats_during_a_stall_before_any_content(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    parts = request_parts(fake, "model", {"stall": "before", "heartbeat_ms": 10}, {"stream": True})
    lines, _ = await read_until(client, parts, lambda ls: ls.count(": ping") >= 2)
    assert [line for line in lines if line] == [": ping", ": ping"]


async def test_no_heartbeat_into_a_json_body(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    url, headers, body = request_parts(fake, "header", {"stall": "mid", "heartbeat_ms": 10}, {})
    with pytest.raises(httpx.ReadTimeout):
        await client.post(url, json=body, headers=headers, timeout=0.2)
    assert last(fake).pings_sent == 0


# ------------------------------------------------------------------------------ validation


async def test_a_passing_draw_drops_the_stream_faults_and_keeps_the_text(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    knobs = {"done": "hang", "malformed_at": 1, "text": "alt", "error_rate": 0, "chunks": 2}
    events = sse_data((await post(client, fake, "header", knobs, stream=True)).text)
    assert events[-1] == "[DONE]" and MALFORMED not in events
    assert text_of(events) == content(16, "alt")


def test_new_knob_validation() -> None:
    assert Behaviour(done="close").fails and Behaviour(malformed_at=0).fails
    assert Behaviour(big_event_bytes=0).fails
    assert not Behaviour(mid_at=3, heartbeat_ms=5, reasoning=True, prefill="reject").fails
    assert Behaviour().with_knobs({"mid_at": "none", "done": ""}) == Behaviour()
    assert Behaviour().with_knobs({"reasoning": "off"}).reasoning is False
    bad = (
        {"mid_at": "-1"},
        {"heartbeat_ms": "-5"},
        {"reasoning": "maybe"},
        {"big_event_bytes": "-1"},
    )
    for knobs in bad:
        with pytest.raises(ValueError):
            Behaviour().with_knobs(knobs)
