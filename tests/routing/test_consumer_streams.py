"""Streams through the chat consumer before and around commit: held back until the first token,
failed over unseen before it, upstream quirks after it, and what is recorded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

import routing.proxy.streams as routing_streams
from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_record
from routing.domain.streams.chat import ChatStream
from routing.domain.streams.sse import SseEvent
from routing.models import Combo, Provider, ProviderConnection
from routing.services import combo_save
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    Behaviour,
    Gateway,
    communicator,
    error,
    read_reply,
    send_body,
)
from tests.routing.stream_support import (
    CUT,
    MODEL,
    SSE,
    TEXT,
    answer_chunks,
    ask,
    chunk,
    event,
    events_of,
    pinging,
    streaming,
    text_of,
)

pytestmark = pytest.mark.django_db(transaction=True)


# --- before commit ----------------------------------------------------------------------------


async def test_the_role_delta_is_held_back_until_the_first_token(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(answer_chunks())

    reply = await ask(gateway)

    assert reply.status == 200
    first = reply.chunks[0]
    assert b'"role":"assistant"' in first and b'"content":"The "' in first
    assert text_of(reply) == "".join(TEXT)
    assert reply.body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    "failure",
    [
        streaming([chunk({"role": "assistant"})], then=CUT),  # cut before any token
        streaming([chunk({"role": "assistant"})]),  # ended before any token
        streaming([event({"error": {"message": "overloaded", "type": "server_error"}})]),
    ],
    ids=["cut", "ended", "in-band-error"],
)
async def test_a_stream_failing_before_its_first_token_fails_over_unseen(
    gateway: Gateway, both: tuple[int, int], failure: Behaviour
) -> None:
    gateway.fake.behaviours.update({PRIMARY: failure, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert reply.status == 200 and reply.connection == both[1]
    assert text_of(reply) == "".join(TEXT)
    assert b"error" not in reply.body


async def test_a_slow_first_token_fails_over_before_any_byte(
    gateway: Gateway, both: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    import routing.proxy.attempts as routing_attempts

    real = routing_attempts.limits_for

    def short(target: Any, context: Any) -> Any:
        limits, _ = real(target, context)
        return limits, 0.05  # the time-to-first-token limit, shortened for the test

    monkeypatch.setattr(routing_attempts, "limits_for", short)
    gateway.fake.behaviours.update(
        {
            PRIMARY: streaming([chunk({"role": "assistant"})], hang=True),
            BACKUP: streaming(answer_chunks()),
        }
    )

    reply = await ask(gateway)

    assert reply.status == 200 and reply.connection == both[1]
    assert text_of(reply) == "".join(TEXT)
    assert "timeout" not in reply.body.decode()


# --- after commit: quirks ---------------------------------------------------------------------


async def test_a_malformed_event_is_dropped_and_the_text_arrives_whole(
    gateway: Gateway, primary: int
) -> None:
    chunks = answer_chunks()
    chunks.insert(3, b'data: {"choices": [\n\n')
    gateway.fake.behaviours[PRIMARY] = streaming(chunks)

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)
    assert b'{"choices": [' not in reply.body


@pytest.mark.parametrize("at", [1, 3], ids=["before the first token", "after commit"])
async def test_an_event_its_observer_cannot_read_is_dropped_like_a_malformed_one(
    gateway: Gateway, primary: int, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """Once, a field of a type the observer did not foresee raised out of the relay: a 500
    before the first token; after it, a stream left open and recorded as a success."""
    observe = ChatStream.observe

    def unforeseen(self: ChatStream, event: SseEvent) -> Any:
        if event.data and b"unforeseen" in event.data:
            raise TypeError("unhashable type: 'list'")
        return observe(self, event)

    monkeypatch.setattr(ChatStream, "observe", unforeseen)
    chunks = answer_chunks()
    chunks.insert(at, chunk({"content": "unforeseen"}))
    gateway.fake.behaviours[PRIMARY] = streaming(chunks)

    reply = await ask(gateway)

    assert reply.status == 200
    assert text_of(reply) == "".join(TEXT)
    assert events_of(reply)[-1] == b"data: [DONE]\n\n"


async def test_a_body_ending_without_done_finishes_with_usage_and_a_done(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(answer_chunks(usage=True, done=False))

    reply = await ask(gateway, stream_options={"include_usage": True})

    assert b'"total_tokens":12' in reply.body
    assert reply.body.endswith(b"data: [DONE]\n\n")
    assert text_of(reply) == "".join(TEXT)


async def test_a_stream_lingering_after_its_finish_is_ended(
    gateway: Gateway, primary: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routing_streams, "FINISH_GRACE_SECONDS", 0.01)
    gateway.fake.behaviours[PRIMARY] = streaming(answer_chunks(done=False), hang=True)

    reply = await ask(gateway)

    assert reply.body.endswith(b"data: [DONE]\n\n")
    assert text_of(reply) == "".join(TEXT)


async def test_a_reset_after_the_finish_ends_the_stream_without_recovery(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    finished = streaming(answer_chunks(usage=True, done=False), then=CUT)
    gateway.fake.behaviours.update({PRIMARY: finished, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT) and reply.body.endswith(b"data: [DONE]\n\n")
    assert reply.body.count(b"[DONE]") == 1
    assert gateway.fake.calls == [PRIMARY]


async def test_a_bare_done_before_any_token_fails_over(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    gateway.fake.behaviours.update(
        {PRIMARY: streaming([b"data: [DONE]\n\n"]), BACKUP: streaming(answer_chunks())}
    )

    reply = await ask(gateway)

    assert reply.connection == both[1] and text_of(reply) == "".join(TEXT)


# --- the attempt policy around streams -------------------------------------------------------


async def test_a_client_deadline_running_out_is_not_charged_to_the_upstream(
    gateway: Gateway, primary: int
) -> None:
    async def silent(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    gateway.fake.behaviours[PRIMARY] = silent
    comm = communicator(
        gateway.app, gateway.key, extra_headers=[(b"x-omniroute-deadline-ms", b"50")]
    )
    await send_body(comm, orjson.dumps({"model": MODEL, "messages": [{"role": "user"}]}))

    reply = await read_reply(comm)

    assert reply.status == 504
    record = await lockout_record(store=gateway.store, provider="acme", connection_id=primary)
    assert record.failures == {} and record.locks == {}


async def test_a_client_deadline_ends_a_committed_stream_in_band_and_charges_no_one(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = pinging(answer_chunks()[:2])  # a token, then pings
    comm = communicator(
        gateway.app, gateway.key, extra_headers=[(b"x-omniroute-deadline-ms", b"300")]
    )
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    await send_body(comm, orjson.dumps(body))
    started = time.monotonic()

    async with asyncio.timeout(3):  # pings come all the time: no read of the reply times out
        reply = await read_reply(comm)

    assert 0.3 <= time.monotonic() - started < 1.5
    last = orjson.loads(events_of(reply)[-1].removeprefix(b"data: "))
    assert last["error"]["code"] == "request_deadline_exceeded"
    assert b"[DONE]" not in reply.body and text_of(reply) == "The "
    record = await lockout_record(store=gateway.store, provider="acme", connection_id=primary)
    assert record.failures == {} and record.locks == {}


async def test_the_default_deadline_stops_no_recovery_after_commit(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    async def late_cut() -> AsyncIterator[bytes]:
        for part in answer_chunks()[:3]:
            yield part
        gateway.clock.advance(400)  # past attempts.deadlineMs (300 s) on the request's clock
        raise CUT

    async def primary(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=late_cut())

    gateway.fake.behaviours.update({PRIMARY: primary, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT) and reply.body.endswith(b"data: [DONE]\n\n")
    assert gateway.fake.calls == [PRIMARY, BACKUP]


async def test_stream_recovery_reopens_a_stream_broken_before_its_first_token_once(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"streamRecovery": {"enabled": True}}
    )
    answers = [streaming([chunk({"role": "assistant"})], then=CUT), streaming(answer_chunks())]

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await answers.pop(0)(request)

    gateway.fake.behaviours.update({PRIMARY: behaviour, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert reply.connection == both[0] and text_of(reply) == "".join(TEXT)
    assert gateway.fake.calls == [PRIMARY, PRIMARY]


async def test_a_combo_override_of_the_attempt_settings_reaches_the_loop(
    gateway: Gateway, both: tuple[int, int], acme: Provider
) -> None:
    # retriesPerTarget 0 on this combo: the 503 moves straight on, where the global policy
    # would retry it once on the same target first
    await database_sync_to_async(add_combo)(acme, {"retriesPerTarget": 0})
    unavailable = error(503, "service unavailable")
    gateway.fake.behaviours.update({PRIMARY: unavailable, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway, "careful")

    assert reply.status == 200 and reply.connection == both[1]
    assert gateway.fake.calls == [PRIMARY, BACKUP]


def add_combo(provider: Provider, overrides: dict[str, int]) -> None:
    connections = ProviderConnection.objects.filter(provider=provider).order_by("priority")
    targets = [
        {"provider": provider, "model": "m1", "connection": connection}
        for connection in connections
    ]
    combo_save(
        combo=Combo(), fields={"name": "careful", "attempt_overrides": overrides}, targets=targets
    )
