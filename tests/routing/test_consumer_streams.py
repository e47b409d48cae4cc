"""Streams through the chat consumer: held back until the first token, relayed whole, and
finished, or ended honestly, after a cut (spec decision 22)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

import routing.streams as routing_streams
from resilience.domain.lockout import LockScope, model_slot
from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_record
from routing.models import Combo, ModelCatalogEntry, Provider, ProviderConnection
from routing.services import combo_save
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    RECEIVE_TIMEOUT_SECONDS,
    Behaviour,
    Gateway,
    Reply,
    communicator,
    error,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

SSE = {"content-type": "text/event-stream"}
TEXT = ["The ", "quick ", "brown ", "fox ", "jumps."]
MODEL = "acme/m1"


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, ident: str = "up-1") -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return event(
        {"id": ident, "object": "chat.completion.chunk", "model": "m1", "choices": [choice]}
    )


def answer_chunks(
    texts: list[str] = TEXT, *, ident: str = "up-1", usage: bool = False, done: bool = True
) -> list[bytes]:
    """A whole streamed answer: a role delta, one chunk per text, the finish, [usage, DONE]."""
    chunks = [chunk({"role": "assistant", "content": ""}, ident=ident)]
    chunks += [chunk({"content": text}, ident=ident) for text in texts]
    chunks.append(chunk({}, "stop", ident))
    if usage:
        chunks.append(event({"id": ident, "choices": [], "usage": {"total_tokens": 12}}))
    if done:
        chunks.append(b"data: [DONE]\n\n")
    return chunks


def streaming(
    chunks: list[bytes], *, then: BaseException | None = None, hang: bool = False
) -> Behaviour:
    """Stream ``chunks``; then raise ``then`` (a cut) or hang (a stall) instead of ending."""

    async def body() -> AsyncIterator[bytes]:
        for part in chunks:
            yield part
        if then is not None:
            raise then
        if hang:
            await asyncio.Event().wait()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=body())

    return behaviour


CUT = httpx.ReadError("connection reset by peer")


def cut_after(n: int, texts: list[str] = TEXT) -> Behaviour:
    """The answer's role delta and first ``n`` texts, then a reset."""
    return streaming(answer_chunks(texts)[: 1 + n], then=CUT)


async def ask(gateway: Gateway, model: str = MODEL) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm, RECEIVE_TIMEOUT_SECONDS)


def events_of(reply: Reply) -> list[bytes]:
    return [part + b"\n\n" for part in reply.body.split(b"\n\n") if part]


def text_of(reply: Reply) -> str:
    text = []
    for raw in events_of(reply):
        data = raw.removeprefix(b"data: ").strip()
        if data != b"[DONE]":
            for choice in orjson.loads(data).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def sent_messages(gateway: Gateway, secret: str) -> list[list[dict[str, Any]]]:
    return [
        orjson.loads(r.content)["messages"]
        for r in gateway.fake.requests
        if r.headers["authorization"] == f"Bearer {secret}"
    ]


@pytest.fixture
def prefill_yes(acme: Provider) -> None:
    """The catalog says ``acme/m1`` accepts an assistant prefill."""
    ModelCatalogEntry.objects.create(provider=acme, model="m1", accepts_prefill="yes")


@pytest.fixture
def both(primary: int, backup: int) -> tuple[int, int]:
    return primary, backup


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
    import routing.attempts as routing_attempts

    real = routing_attempts.limits_for

    def short(target: Any, context: Any) -> Any:
        limits, _ = real(target, context)
        return limits, 0.05  # the time-to-first-token limit, shortened for the test

    monkeypatch.setattr(routing_attempts, "limits_for", short)
    gateway.fake.behaviours.update(
        {PRIMARY: streaming([chunk({"role": "assistant"})], hang=True),
         BACKUP: streaming(answer_chunks())}
    )  # fmt: skip

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


async def test_a_body_ending_without_done_finishes_with_usage_and_a_done(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = streaming(answer_chunks(usage=True, done=False))

    reply = await ask(gateway)

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


# --- after commit: recovery -------------------------------------------------------------------


async def test_a_cut_is_finished_by_regeneration_and_the_text_arrives_once(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    gateway.fake.behaviours.update(
        {PRIMARY: cut_after(2), BACKUP: streaming(answer_chunks(ident="up-2"))}
    )

    reply = await ask(gateway)

    assert reply.status == 200
    assert text_of(reply) == "".join(TEXT)
    assert reply.body.endswith(b"data: [DONE]\n\n")
    assert b"up-2" not in reply.body  # the continuation speaks as the first stream
    assert gateway.fake.calls == [PRIMARY, BACKUP]
    assert [m[-1]["role"] for m in sent_messages(gateway, BACKUP)] == ["user"]  # no prefill
    # the cut is a failed attempt of the pair that broke, recorded as one (decision 14)
    broke = await lockout_record(store=gateway.store, provider="acme", connection_id=both[0])
    served = await lockout_record(store=gateway.store, provider="acme", connection_id=both[1])
    slot = model_slot("m1", LockScope.EXACT)
    assert broke.failures[slot].consecutive == 1 and slot not in served.failures


async def test_a_cut_is_continued_with_a_prefill_where_the_model_accepts_one(
    gateway: Gateway, both: tuple[int, int], prefill_yes: None
) -> None:
    gateway.fake.behaviours.update(
        {PRIMARY: cut_after(2), BACKUP: streaming(answer_chunks(TEXT[2:], ident="up-2"))}
    )

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)
    (messages,) = sent_messages(gateway, BACKUP)
    assert messages[-1] == {"role": "assistant", "content": "The quick "}


async def test_a_regeneration_that_differs_ends_with_an_error_event_and_no_done(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    other = ["A ", "different ", "answer."]
    gateway.fake.behaviours.update({PRIMARY: cut_after(2), BACKUP: streaming(answer_chunks(other))})

    reply = await ask(gateway)

    last = orjson.loads(events_of(reply)[-1].removeprefix(b"data: "))
    assert last["error"]["code"] == "upstream_stream_interrupted"
    assert b"[DONE]" not in reply.body
    assert text_of_without_error(reply) == "The quick "


def text_of_without_error(reply: Reply) -> str:
    kept = [raw for raw in events_of(reply) if b'"error"' not in raw]
    return text_of(Reply(reply.status, reply.headers, kept))


async def test_a_stall_after_commit_is_recovered_like_a_cut(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    stalled = streaming(answer_chunks()[:3], then=httpx.ReadTimeout("idle"))
    gateway.fake.behaviours.update({PRIMARY: stalled, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)
    assert reply.body.endswith(b"data: [DONE]\n\n")


async def test_a_tool_call_in_flight_is_never_continued(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    tool = chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1"}]})
    gateway.fake.behaviours.update(
        {PRIMARY: streaming([tool], then=CUT), BACKUP: streaming(answer_chunks())}
    )

    reply = await ask(gateway)

    assert b"upstream_stream_interrupted" in reply.body and b"[DONE]" not in reply.body
    assert gateway.fake.calls == [PRIMARY]


async def test_without_continue_mid_stream_a_cut_ends_honestly(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"streamRecovery": {"continueMidStream": False}}
    )
    gateway.fake.behaviours.update({PRIMARY: cut_after(2), BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert b"upstream_stream_interrupted" in reply.body and b"[DONE]" not in reply.body
    assert b"ReadError" in reply.body  # the original failure
    assert gateway.fake.calls == [PRIMARY]


async def test_the_only_target_regenerates_after_a_cut(gateway: Gateway, primary: int) -> None:
    cuts = [cut_after(3), streaming(answer_chunks())]

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await cuts.pop(0)(request)

    gateway.fake.behaviours[PRIMARY] = behaviour

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)
    assert gateway.fake.calls == [PRIMARY, PRIMARY]


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


# --- review fixes: finished answers stay finished, each attempt recorded once ---------------


async def test_a_reset_after_the_finish_ends_the_stream_without_recovery(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    finished = streaming(answer_chunks(usage=True, done=False), then=CUT)
    gateway.fake.behaviours.update({PRIMARY: finished, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT) and reply.body.endswith(b"data: [DONE]\n\n")
    assert reply.body.count(b"[DONE]") == 1
    assert gateway.fake.calls == [PRIMARY]


async def test_a_regeneration_whose_finish_completes_the_sent_text_is_not_divergent(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    # the client has "The quick "; the regeneration says "The " then "quick " with its finish
    regenerated = [
        chunk({"role": "assistant", "content": "The "}), chunk({"content": "quick "}, "stop"),
        b"data: [DONE]\n\n",
    ]  # fmt: skip
    gateway.fake.behaviours.update({PRIMARY: cut_after(2), BACKUP: streaming(regenerated)})

    reply = await ask(gateway)

    assert text_of(reply) == "The quick "
    assert b"error" not in reply.body and reply.body.endswith(b"data: [DONE]\n\n")


async def test_a_bare_done_before_any_token_fails_over(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    gateway.fake.behaviours.update(
        {PRIMARY: streaming([b"data: [DONE]\n\n"]), BACKUP: streaming(answer_chunks())}
    )

    reply = await ask(gateway)

    assert reply.connection == both[1] and text_of(reply) == "".join(TEXT)


async def test_a_target_that_always_cuts_after_commit_is_locked_like_any_failing_pair(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    # The commit does not count as a success that resets the pair's run of failures: each
    # request's attempt is recorded once, as the failure it was.
    gateway.fake.behaviours.update({PRIMARY: cut_after(1), BACKUP: streaming(answer_chunks())})
    for _ in range(3):
        assert text_of(await ask(gateway)) == "".join(TEXT)
        gateway.clock.advance(1)

    record = await lockout_record(store=gateway.store, provider="acme", connection_id=both[0])
    slot = model_slot("m1", LockScope.EXACT)
    assert record.failures[slot].consecutive == 3
    assert record.lock_for("m1", gateway.clock.now) is not None


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
