"""The fake upstream's OpenAI Responses API route (no Django models, no DB): the ``response``
object and its typed stream as the official ``openai`` SDK reads them, the mid-stream faults
counted in delta events, errors in the OpenAI shape, and the journal record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.responses import ResponseTextDeltaEvent

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.tools.fakeupstream.support import is_transport_error, last, named_events, read_until

HEAD = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
TAIL = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
DELTA = "response.output_text.delta"


@pytest.fixture
async def sdk(fake: FakeUpstream) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official client on the fake, without retries."""
    async with openai.AsyncOpenAI(base_url=fake.base_url(), api_key="k", max_retries=0) as c:
        yield c


def on(sdk: openai.AsyncOpenAI, fake: FakeUpstream, **knobs: object) -> openai.AsyncOpenAI:
    """``sdk`` on a scenario path carrying ``knobs``."""
    return sdk.with_options(base_url=fake.base_url(**knobs))


async def raw(client: httpx.AsyncClient, fake: FakeUpstream, **body: Any) -> httpx.Response:
    return await client.post(fake.base_url() + "/responses", json={"model": "gpt-4o", **body})


# ------------------------------------------------------------------------------ answers


async def test_sdk_reads_the_response(fake: FakeUpstream, sdk: openai.AsyncOpenAI) -> None:
    response = await sdk.responses.create(model="gpt-4o?chunks=5", input="hi")
    assert response.output_text == content(40)
    assert response.id.startswith("resp_fake_") and response.status == "completed"
    assert response.model == "gpt-4o" and str(response.output[0].id).startswith("msg_fake_")
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (8, 10)
    assert response.usage.total_tokens == 18
    rec = last(fake)
    assert rec.path == "/v1/responses" and rec.model == "gpt-4o" and not rec.stream
    assert rec.completed and rec.prefill is None


async def test_ids_differ_and_match_within_a_stream(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    ids = [(await raw(client, fake)).json()["id"] for _ in range(2)]
    assert ids[0] != ids[1] and len(ids[0]) == len(ids[1]) == len("resp_fake_") + 12
    events = [orjson.loads(d) for _, d in named_events((await raw(client, fake, stream=True)).text)]
    assert len({e["response"]["id"] for e in events if "response" in e}) == 1
    assert len({e["item_id"] for e in events if "item_id" in e}) == 1


async def test_stream_event_order_and_sequence_numbers(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await raw(client, fake, model="gpt-4o?chunks=3&chunk_size=4", stream=True)
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert "[DONE]" not in resp.text
    pairs = named_events(resp.text)
    assert [name for name, _ in pairs] == [*HEAD, DELTA, DELTA, DELTA, *TAIL]
    events = [orjson.loads(data) for _, data in pairs]
    assert [e["type"] for e in events] == [name for name, _ in pairs]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["delta"] for e in events[4:7]] == ["The ", "quic", "k br"]
    assert (
        events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    )
    assert events[2]["item"]["content"] == [] and events[2]["item"]["status"] == "in_progress"
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["output_tokens"] == 3
    assert completed["output"][0]["content"][0]["text"] == content(12)
    assert await fake.wait_for_async(lambda f: last(f).completed, timeout=2)
    assert last(fake).stream and last(fake).chunks_sent == 3


async def test_sdk_iterates_the_stream(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.responses.create(model="gpt-4o", input="hi", stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == [*HEAD, *[DELTA] * 20, *TAIL]
    assert "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)) == content(160)


async def test_sdk_stream_helper_gets_the_final_response(sdk: openai.AsyncOpenAI) -> None:
    async with sdk.responses.stream(model="gpt-4o?text=alt", input="hi") as stream:
        final = await stream.get_final_response()
    assert final.output_text == content(160, "alt") and final.status == "completed"


async def test_reasoning_is_a_reasoning_summary(
    fake: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    plain = await on(sdk, fake, reasoning="true", chunks=2).responses.create(model="m", input="x")
    (item,) = plain.output
    assert item.type == "reasoning" and item.id.startswith("rs_fake_")
    assert [s.text for s in item.summary] == [content(16)] and plain.output_text == ""
    stream = await on(sdk, fake, reasoning="true", chunks=2).responses.create(
        model="m", input="x", stream=True
    )
    events = [event async for event in stream]
    deltas = [e for e in events if e.type == "response.reasoning_summary_text.delta"]
    assert [(d.delta, d.summary_index) for d in deltas] == [("The quic", 0), ("k brown ", 0)]
    assert not [e for e in events if e.type == DELTA]
    assert events[-1].type == "response.completed"


async def test_prefill_does_not_apply(fake: FakeUpstream, client: httpx.AsyncClient) -> None:
    turns = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "The"}]
    resp = await raw(client, fake, model="m?prefill=reject", input=turns, messages=turns)
    assert resp.status_code == 200
    assert resp.json()["output"][0]["content"][0]["text"] == content(160)
    assert last(fake).prefill is None and fake.stats["failed"] == 0


# ------------------------------------------------------------------------------ faults


async def test_reset_mid_stream_after_mid_at_deltas(
    fake: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    seen: list[str] = []
    with pytest.raises(Exception) as info:  # checked below: the SDK's or its HTTP library's
        stream = await on(sdk, fake, reset="mid", mid_at=3).responses.create(
            model="m", input="x", stream=True
        )
        async for event in stream:
            seen.append(event.type)
    assert is_transport_error(info.value)
    assert seen == [*HEAD, DELTA, DELTA, DELTA]
    assert last(fake).aborted_at is not None and last(fake).chunks_sent == 3


async def test_cut_mid_ends_without_the_completed_event(
    fake: FakeUpstream, client: httpx.AsyncClient, sdk: openai.AsyncOpenAI
) -> None:
    resp = await raw(client, fake, model="m?cut=mid&mid_at=2", stream=True)
    assert [name for name, _ in named_events(resp.text)] == [*HEAD, DELTA, DELTA]
    async with on(sdk, fake, cut="mid").responses.stream(model="m", input="x") as stream:
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()


async def test_malformed_event_before_delta_k(
    fake: FakeUpstream, client: httpx.AsyncClient, sdk: openai.AsyncOpenAI
) -> None:
    resp = await raw(client, fake, model="m?malformed_at=1&chunks=2", stream=True)
    pairs = named_events(resp.text)
    assert [name for name, _ in pairs] == [*HEAD, DELTA, DELTA, DELTA, *TAIL]
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(pairs[5][1])
    assert orjson.loads(pairs[6][1])["delta"] == content(16)[8:]
    assert fake.stats["failed"] == 1
    with pytest.raises(ValueError, match="Expecting"):  # the SDK's JSON decode error
        stream = await on(sdk, fake, malformed_at=0).responses.create(
            model="m", input="x", stream=True
        )
        _ = [event async for event in stream]


async def test_done_close_is_a_normal_end_and_hang_stays_open(
    fake: FakeUpstream, client: httpx.AsyncClient
) -> None:
    resp = await raw(client, fake, model="m?done=close&chunks=1", stream=True)
    assert named_events(resp.text)[-1][0] == "response.completed"
    assert last(fake).behaviour.done == "yes" and fake.stats["failed"] == 0
    url = fake.base_url(done="hang", chunks=1) + "/responses"
    lines, timed_out = await read_until(
        client, (url, {}, {"model": "m", "stream": True}), lambda ls: False
    )
    assert timed_out and named_events("\n".join(lines))[-1][0] == "response.completed"
    assert fake.stats["failed"] == 1


async def test_error_status_in_the_openai_shape(
    fake: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        await on(sdk, fake, status=429, retry_after=3).responses.create(model="m", input="x")
    assert info.value.response.headers["retry-after"] == "3"
    assert info.value.body == {
        "message": "fake upstream error 429",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
    }
    with pytest.raises(openai.InternalServerError):
        await on(sdk, fake, status=503).responses.create(model="m", input="x", stream=True)
    assert fake.stats["chat"] == fake.stats["failed"] == 2
