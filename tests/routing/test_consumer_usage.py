"""Usage through the consumers: a streamed chat request asks its upstream for the usage block
and a client that did not ask for it never sees it; the tokens of every answer (a chat,
Messages or Responses stream, a whole answer) reach the metrics and the request log alike."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from omniroute.core.store import MemoryStore
from routing.domain.client.endpoints import MESSAGES, RESPONSES
from routing.models import Provider
from tests.routing.format_support import (
    CLAUDE_PRIMARY,
    Relay,
    add_anthropic_provider,
    json_answer,
    message_object,
    messages_events,
    messages_request,
    relay_for,
    responses_events,
    responses_request,
)
from tests.routing.harness import (
    PRIMARY,
    Behaviour,
    FakeClock,
    FakeWriter,
    Gateway,
    add_connection,
    chunks_of,
    communicator,
    error,
    read_reply,
    send_body,
)
from tests.routing.harness import chat as chat_body
from tests.routing.stream_support import (
    SSE,
    TEXT,
    answer_chunks,
    ask,
    chunk,
    event,
    events_of,
    streaming,
    text_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
USAGE_EVENT = event({"id": "up-1", "choices": [], "usage": USAGE})


async def counted_tokens(provider: str) -> tuple[float, float]:
    """``omniroute_tokens_total`` of ``provider``, in and out, as ``/metrics`` says."""
    text = (await sync_to_async(Client().get)("/metrics")).content.decode()
    found = {"in": 0.0, "out": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "omniroute_tokens_total" and sample.labels["provider"] == provider:
                found[sample.labels["direction"]] += sample.value
    return found["in"], found["out"]


def usage_stream() -> list[bytes]:
    """A chat stream as an upstream asked for usage sends it: the usage chunk before [DONE]."""
    chunks = answer_chunks()
    return [*chunks[:-1], USAGE_EVENT, chunks[-1]]


def sent_options(gateway: Gateway) -> Any:
    return orjson.loads(gateway.fake.requests[-1].content).get("stream_options")


# --- asking, and hiding ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ({}, {"include_usage": True}),
        (
            {"stream_options": {"include_obfuscation": False}},
            {"include_obfuscation": False, "include_usage": True},
        ),
    ],
)
async def test_a_client_that_did_not_ask_gets_no_usage_chunk_the_upstream_was_asked_for(
    gateway: Gateway, primary: int, given: dict[str, Any], sent: dict[str, Any]
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(usage_stream())

    reply = await ask(gateway, **given)

    assert sent_options(gateway) == sent
    assert b'"usage"' not in reply.body
    assert text_of(reply) == "".join(TEXT)
    assert reply.body.endswith(b"data: [DONE]\n\n") and reply.body.count(b"[DONE]") == 1


async def test_a_client_that_asked_gets_the_usage_chunk_as_it_came(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(usage_stream())

    reply = await ask(gateway, stream_options={"include_usage": True})

    assert sent_options(gateway) == {"include_usage": True}
    assert events_of(reply)[-2:] == [USAGE_EVENT, b"data: [DONE]\n\n"]


async def test_a_finish_chunk_carrying_usage_reaches_an_unasking_client_without_it(
    gateway: Gateway, primary: int
) -> None:
    chunks = answer_chunks()
    finish = orjson.loads(chunk({}, "stop").removeprefix(b"data: "))
    chunks[-2] = event({**finish, "usage": USAGE})  # some providers send usage with the finish
    gateway.fake.behaviours[PRIMARY] = streaming(chunks)

    reply = await ask(gateway)

    assert b'"usage"' not in reply.body
    assert events_of(reply)[-2:] == [event(finish), b"data: [DONE]\n\n"]


REFUSAL = error(422, "Extra inputs are not permitted: stream_options", "invalid_request_error")


def refusing_stream_options(then: Any) -> Any:
    """An upstream that knows no ``stream_options``: it refuses a request naming them."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        if b"stream_options" in request.content:
            return await REFUSAL(request)
        return await then(request)

    return behaviour


async def test_an_upstream_that_refuses_the_usage_request_answers_without_it_and_is_not_asked_again(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = refusing_stream_options(streaming(answer_chunks()))

    first = await ask(gateway)
    second = await ask(gateway)

    assert first.status == second.status == 200
    assert text_of(first) == text_of(second) == "".join(TEXT)
    sent = [orjson.loads(r.content).get("stream_options") for r in gateway.fake.requests]
    assert sent == [{"include_usage": True}, None, None]  # asked once, then never again


async def test_a_client_that_asked_for_usage_itself_gets_the_refusal(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = refusing_stream_options(streaming(answer_chunks()))

    reply = await ask(gateway, stream_options={"include_usage": True})

    assert reply.status == 422
    assert len(gateway.fake.requests) == 1


# --- tokens: metrics and the request log, one reading ------------------------------------------


async def test_a_chat_stream_s_tokens_reach_the_metrics_and_the_request_log(
    gateway: Gateway, primary: int, request_metrics: None, request_log: FakeWriter
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(usage_stream())

    await ask(gateway)  # the client did not ask: its tokens are counted all the same

    assert await counted_tokens("acme") == (9, 4)
    [record] = request_log.records
    assert (record.tokens_in, record.tokens_out) == (9, 4)


async def test_a_whole_answer_s_tokens_reach_the_metrics_and_the_request_log(
    gateway: Gateway, primary: int, request_metrics: None, request_log: FakeWriter
) -> None:
    completion = {
        "id": "c-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": USAGE,
    }
    gateway.fake.behaviours[PRIMARY] = json_answer(completion)
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat_body())

    assert (await read_reply(comm)).status == 200
    assert await counted_tokens("acme") == (9, 4)
    [record] = request_log.records
    assert (record.tokens_in, record.tokens_out) == (9, 4)


async def messages_relay(clock: FakeClock, store: MemoryStore) -> Relay:
    def setup() -> Relay:
        add_connection(add_anthropic_provider(), "primary", CLAUDE_PRIMARY)
        return relay_for(MESSAGES, clock, store)

    return await database_sync_to_async(setup)()


async def responses_relay(acme: Provider, clock: FakeClock, store: MemoryStore) -> Relay:
    def setup() -> Relay:
        add_connection(acme, "primary", PRIMARY)
        return relay_for(RESPONSES, clock, store)

    return await database_sync_to_async(setup)()


def streamed(events: list[bytes]) -> Behaviour:
    """Stream ``events``, one chunk each."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=chunks_of(events))

    return behaviour


async def test_a_messages_stream_s_tokens_reach_the_metrics_and_the_request_log(
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    policy_clock: FakeClock,
    request_metrics: None,
    request_log: FakeWriter,
) -> None:
    relay = await messages_relay(clock, store)
    relay.fake.behaviours[CLAUDE_PRIMARY] = streamed(messages_events())

    reply = await relay.post(messages_request(stream=True))

    assert reply.status == 200
    assert await counted_tokens("claude") == (3, 5)  # message_start's in, message_delta's out
    [record] = request_log.records
    assert (record.tokens_in, record.tokens_out) == (3, 5)
    assert b'"usage"' in reply.body  # a Messages client always gets its usage


async def test_a_messages_whole_answer_s_tokens_are_counted(
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    policy_clock: FakeClock,
    request_metrics: None,
    request_log: FakeWriter,
) -> None:
    relay = await messages_relay(clock, store)
    relay.fake.behaviours[CLAUDE_PRIMARY] = json_answer(message_object())

    assert (await relay.post(messages_request())).status == 200

    assert await counted_tokens("claude") == (3, 3)
    assert [(r.tokens_in, r.tokens_out) for r in request_log.records] == [(3, 3)]


async def test_a_responses_stream_s_tokens_reach_the_metrics_and_the_request_log(
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    policy_clock: FakeClock,
    acme: Provider,
    request_metrics: None,
    request_log: FakeWriter,
) -> None:
    relay = await responses_relay(acme, clock, store)
    usage = {"input_tokens": 8, "output_tokens": 6, "total_tokens": 14}
    relay.fake.behaviours[PRIMARY] = streamed(responses_events(usage=usage))

    reply = await relay.post(responses_request(stream=True))

    assert reply.status == 200
    assert "stream_options" not in relay.fake.bodies()[-1]  # only chat streams are asked
    assert await counted_tokens("acme") == (8, 6)
    [record] = request_log.records
    assert (record.tokens_in, record.tokens_out) == (8, 6)
