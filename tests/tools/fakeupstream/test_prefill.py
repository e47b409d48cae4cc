"""The fake upstream's ``prefill`` knob (no Django models, no DB): a request whose last
message is the assistant's is continued, refused or answered in full, streamed or not.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.tools.fakeupstream.support import CHANNELS, deltas, last, post, sse_data, text_of

FULL = content(160)


def conversation(prefill: object) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Say it"}, {"role": "assistant", "content": prefill}]


@pytest.mark.parametrize("channel", CHANNELS)
async def test_accept_streams_only_the_continuation(
    fake: FakeUpstream, client: httpx.AsyncClient, channel: str
) -> None:
    prefill = FULL[:20]
    resp = await post(
        client,
        fake,
        channel,
        {"prefill": "accept"},
        stream=True,
        messages=conversation(prefill),
        stream_options={"include_usage": True},
    )
    events = sse_data(resp.text)
    pieces = [d["content"] for d in deltas(events[:-2]) if "content" in d]
    assert "".join(pieces) == FULL[20:]
    assert [len(p) for p in pieces] == [8] * 17 + [4]  # chunked from the continuation's start
    assert orjson.loads(events[-2])["usage"]["completion_tokens"] == (140 + 3) // 4
    assert last(fake).prefill == prefill


async def test_accept_is_the_default_and_applies_without_a_match(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, stream=True, messages=conversation("x" * 10))
    assert text_of(sse_data(resp.text)) == FULL[10:]


async def test_accept_continues_the_alt_text(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    alt = content(160, "alt")
    resp = await post(client, fake, "model", {"text": "alt"}, messages=conversation(alt[:50]))
    assert resp.json()["choices"][0]["message"]["content"] == alt[50:]


async def test_accept_completion_counts_only_the_continuation(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(client, fake, "header", {"chunks": 4}, messages=conversation(FULL[:12]))
    data = resp.json()
    assert data["choices"][0]["message"]["content"] == content(32)[12:]
    assert data["usage"]["completion_tokens"] == (20 + 3) // 4


async def test_a_prefill_as_long_as_the_text_leaves_nothing_to_say(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(
        client, fake, "header", {"chunks": 2}, stream=True, messages=conversation(FULL)
    )
    events = sse_data(resp.text)
    assert len(events) == 2 and events[-1] == "[DONE]"
    assert orjson.loads(events[0])["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("stream", [False, True])
async def test_reject_answers_400(
    fake: FakeUpstream, client: httpx.AsyncClient, stream: bool
) -> None:
    resp = await post(
        client, fake, "path", {"prefill": "reject"}, stream=stream, messages=conversation("The")
    )
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "assistant prefill is not supported" in error["message"]
    assert fake.stats["failed"] == 1


async def test_reject_without_a_prefill_answers_normally(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await post(
        client, fake, "header", {"prefill": "reject"}, messages=[{"role": "user", "content": "hi"}]
    )
    assert resp.status_code == 200 and fake.stats["failed"] == 0
    assert last(fake).prefill is None


async def test_ignore_answers_the_whole_text(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    messages = conversation(FULL[:20])
    resp = await post(client, fake, "script", {"prefill": "ignore"}, stream=True, messages=messages)
    assert text_of(sse_data(resp.text)) == FULL
    plain = await post(client, fake, "header", {"prefill": "ignore"}, messages=messages)
    assert plain.json()["choices"][0]["message"]["content"] == FULL


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": "The"}, {"role": "user", "content": "go on"}],
        conversation([{"type": "text", "text": "The"}]),  # not string content
        [],
    ],
)
async def test_only_a_last_assistant_string_is_a_prefill(
    fake: FakeUpstream, client: httpx.AsyncClient, messages: list[dict[str, Any]]
) -> None:
    resp = await post(client, fake, "header", {"prefill": "reject"}, messages=messages)
    assert resp.status_code == 200 and last(fake).prefill is None


async def test_bad_prefill_value_is_400(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    resp = await post(client, fake, "model", {"prefill": "sometimes"})
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "fake_knob_error"
