"""The fake upstream's Anthropic Messages API route (no Django models, no DB): the ``message``
and its typed stream as the official ``anthropic`` SDK reads them, the native assistant
prefill, the mid-stream faults counted in delta events, errors in the Anthropic shape, and the
journal record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.tools.fakeupstream.support import is_transport_error, last, named_events, read_until

HEAD = ["message_start", "content_block_start", "ping"]
TAIL = ["content_block_stop", "message_delta", "message_stop"]
DELTA = "content_block_delta"
HI: list[Any] = [{"role": "user", "content": "hi"}]
FULL = content(160)


@pytest.fixture
async def sdk(fake: FakeUpstream) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The official client on the fake, without retries."""
    url = fake.anthropic_base_url()
    async with anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0) as c:
        yield c


def on(sdk: anthropic.AsyncAnthropic, fake: FakeUpstream, **knobs: object) -> Any:
    """``sdk``'s messages resource on a scenario path carrying ``knobs``."""
    return sdk.with_options(base_url=fake.anthropic_base_url(**knobs)).messages


def texts(message: Any) -> list[str]:
    """The texts of a message's text blocks."""
    return [block.text for block in message.content if block.type == "text"]


async def raw(client: httpx.AsyncClient, fake: FakeUpstream, **body: Any) -> httpx.Response:
    payload = {"model": "claude", "max_tokens": 100, "messages": HI, **body}
    return await client.post(fake.url + "/v1/messages", json=payload)


# ------------------------------------------------------------------------------ answers


async def test_sdk_reads_the_message(fake: FakeUpstream, sdk: anthropic.AsyncAnthropic) -> None:
    message = await sdk.messages.create(model="claude?chunks=5", max_tokens=100, messages=HI)
    assert [b.type for b in message.content] == ["text"] and texts(message) == [content(40)]
    assert message.id.startswith("msg_fake_") and message.model == "claude"
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (8, 10)
    rec = last(fake)
    assert rec.path == "/v1/messages" and rec.model == "claude" and not rec.stream
    assert rec.headers["anthropic-version"] and rec.completed and rec.prefill is None


async def test_anthropic_headers_are_recorded_not_required(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    headers = {"x-api-key": "sk-ant-fake", "anthropic-version": "2023-06-01"}
    payload = {"model": "c", "messages": HI}
    resp = await client.post(fake.url + "/v1/messages", json=payload, headers=headers)
    assert resp.status_code == 200
    assert {k: last(fake).headers[k] for k in headers} == headers
    assert (await raw(client, fake)).status_code == 200
    assert "x-api-key" not in last(fake).headers


async def test_stream_event_order(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await raw(client, fake, model="claude?chunks=2&chunk_size=5", stream=True)
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert "[DONE]" not in resp.text
    pairs = named_events(resp.text)
    assert [name for name, _ in pairs] == [*HEAD, DELTA, DELTA, *TAIL]
    events = [orjson.loads(data) for _, data in pairs]
    assert [e["type"] for e in events] == [name for name, _ in pairs]
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"] == {"input_tokens": 8, "output_tokens": 1}
    assert events[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert [e["delta"] for e in events[3:5]] == [
        {"type": "text_delta", "text": "The q"},
        {"type": "text_delta", "text": "uick "},
    ]
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[-2]["usage"] == {"output_tokens": 3}
    assert await fake.wait_for_async(lambda f: last(f).completed, timeout=2)
    assert last(fake).stream and last(fake).chunks_sent == 2


async def test_sdk_stream_gets_the_final_text(sdk: anthropic.AsyncAnthropic) -> None:
    async with sdk.messages.stream(model="claude", max_tokens=100, messages=HI) as stream:
        assert await stream.get_final_text() == FULL
    final = await stream.get_final_message()
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 40


async def test_reasoning_is_a_thinking_block(
    fake: FakeUpstream, sdk: anthropic.AsyncAnthropic
) -> None:
    message = await on(sdk, fake, reasoning="on", chunks=2).create(
        model="claude", max_tokens=100, messages=HI
    )
    assert [b.model_dump() for b in message.content] == [
        {"type": "thinking", "thinking": content(16), "signature": "fake"}
    ]
    async with on(sdk, fake, reasoning="on", chunks=2).stream(
        model="claude", max_tokens=100, messages=HI
    ) as stream:
        final = await stream.get_final_message()
    (block,) = final.content
    assert (block.type, block.thinking, block.signature) == ("thinking", content(16), "fake")


# ------------------------------------------------------------------------------ prefill


@pytest.mark.parametrize("prefill", ["The quick", [{"type": "text", "text": "The quick"}]])
async def test_accepted_prefill_continues(
    fake: FakeUpstream, sdk: anthropic.AsyncAnthropic, prefill: object
) -> None:
    turns = [*HI, {"role": "assistant", "content": prefill}]
    message = await sdk.messages.create(model="claude", max_tokens=100, messages=turns)
    assert texts(message) == [FULL[9:]]
    async with sdk.messages.stream(model="claude", max_tokens=100, messages=turns) as stream:
        assert await stream.get_final_text() == FULL[9:]
    assert last(fake).prefill == "The quick" and fake.stats["failed"] == 0


async def test_rejected_prefill_is_a_400_in_the_anthropic_shape(
    fake: FakeUpstream, sdk: anthropic.AsyncAnthropic
) -> None:
    turns = [*HI, {"role": "assistant", "content": "The"}]
    with pytest.raises(anthropic.BadRequestError) as info:
        await on(sdk, fake, prefill="reject").create(model="c", max_tokens=9, messages=turns)
    body: Any = info.value.body
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == "invalid_request_error"
    assert "assistant prefill is not supported" in body["error"]["message"]
    assert last(fake).prefill == "The" and fake.stats["failed"] == 1
    answer = await on(sdk, fake, prefill="reject").create(model="c", max_tokens=9, messages=HI)
    assert texts(answer) == [FULL]


# ------------------------------------------------------------------------------ faults


async def test_reset_mid_stream_after_mid_at_deltas(
    fake: FakeUpstream, sdk: anthropic.AsyncAnthropic
) -> None:
    seen: list[str] = []
    with pytest.raises(Exception) as info:  # checked below: the SDK's or its HTTP library's
        async with on(sdk, fake, reset="mid", mid_at=3).stream(
            model="c", max_tokens=9, messages=HI
        ) as stream:
            async for event in stream:
                seen.append(event.type)
    assert is_transport_error(info.value)
    assert seen.count("content_block_delta") == 3 and "message_stop" not in seen
    assert last(fake).aborted_at is not None and last(fake).chunks_sent == 3


async def test_cut_mid_ends_without_the_stop_events(
    fake: FakeUpstream, client: httpx.AsyncClient, sdk: anthropic.AsyncAnthropic
) -> None:
    resp = await raw(client, fake, model="c?cut=mid&mid_at=2", stream=True)
    assert [name for name, _ in named_events(resp.text)] == [*HEAD, DELTA, DELTA]
    async with on(sdk, fake, cut="mid", mid_at=1).stream(
        model="c", max_tokens=9, messages=HI
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason is None and texts(final) == [FULL[:8]]


async def test_malformed_event_before_delta_k(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await raw(client, fake, model="c?malformed_at=1&chunks=2", stream=True)
    pairs = named_events(resp.text)
    assert [name for name, _ in pairs] == [*HEAD, DELTA, DELTA, DELTA, *TAIL]
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(pairs[4][1])
    assert orjson.loads(pairs[5][1])["delta"]["text"] == FULL[8:16]
    assert fake.stats["failed"] == 1


async def test_stall_mid_sends_heartbeats(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    url = fake.anthropic_base_url(stall="mid", mid_at=1, heartbeat_ms=10) + "/v1/messages"
    parts: tuple[str, dict[str, str], dict[str, Any]] = (url, {}, {"model": "c", "stream": True})
    lines, timed_out = await read_until(client, parts, lambda ls: ls.count(": ping") >= 2)
    assert not timed_out
    assert [name for name, _ in named_events("\n".join(lines))] == [*HEAD, DELTA]


async def test_done_hang_stays_open_after_message_stop(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    url = fake.anthropic_base_url(done="hang", chunks=1) + "/v1/messages"
    lines, timed_out = await read_until(
        client, (url, {}, {"model": "c", "stream": True}), lambda ls: False
    )
    assert timed_out and named_events("\n".join(lines))[-1][0] == "message_stop"


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (400, "invalid_request_error", anthropic.BadRequestError),
        (401, "authentication_error", anthropic.AuthenticationError),
        (403, "permission_error", anthropic.PermissionDeniedError),
        (404, "not_found_error", anthropic.NotFoundError),
        (413, "request_too_large", anthropic.APIStatusError),
        (429, "rate_limit_error", anthropic.RateLimitError),
        (500, "api_error", anthropic.InternalServerError),
        (503, "api_error", anthropic.InternalServerError),
        (529, "overloaded_error", anthropic.APIStatusError),
    ],
)
async def test_error_status_in_the_anthropic_shape(
    fake: FakeUpstream,
    sdk: anthropic.AsyncAnthropic,
    status: int,
    kind: str,
    error: type[anthropic.APIStatusError],
) -> None:
    with pytest.raises(error) as info:
        await on(sdk, fake, status=status).create(model="c", max_tokens=9, messages=HI)
    assert info.value.status_code == status
    assert info.value.body == {
        "type": "error",
        "error": {"type": kind, "message": f"fake upstream error {status}"},
    }
    assert fake.stats["failed"] == 1


async def test_body_knob_and_knob_errors(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await raw(client, fake, model="c?status=502&body=upstream+down", stream=True)
    assert (resp.status_code, resp.text) == (502, "upstream down")
    resp = await raw(client, fake, model="c?colour=red")
    assert resp.status_code == 400
    assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == "fake_knob_error"
