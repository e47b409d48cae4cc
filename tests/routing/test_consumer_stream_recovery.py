"""Streams after commit through the chat consumer: a cut or a stall is finished on another
target (prefill continuation, or regenerate-and-splice) or ended honestly."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

import routing.proxy.attempts as routing_attempts
from resilience.domain.lockout import LockScope, model_slot
from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_record
from routing.domain.streams import state as stream_state
from routing.models import ModelCatalogEntry, Provider
from tests.routing.harness import BACKUP, PRIMARY, Gateway
from tests.routing.stream_support import (
    CUT,
    PING,
    TEXT,
    answer_chunks,
    ask,
    chunk,
    cut_after,
    events_of,
    pinging,
    sent_messages,
    streaming,
    text_of,
    text_of_without_error,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def prefill_yes(acme: Provider) -> None:
    """The catalog says ``acme/m1`` accepts an assistant prefill."""
    ModelCatalogEntry.objects.create(provider=acme, model="m1", accepts_prefill="yes")


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
    # the cut is a failed attempt of the pair that broke, recorded as one
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


async def test_a_stall_after_commit_is_recovered_like_a_cut(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    stalled = streaming(answer_chunks()[:3], then=httpx.ReadTimeout("idle"))
    gateway.fake.behaviours.update({PRIMARY: stalled, BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)
    assert reply.body.endswith(b"data: [DONE]\n\n")


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stream attempt's idle limit is 0.2 s."""
    real = routing_attempts.limits_for

    def short(target: Any, context: Any) -> Any:
        limits, first_token = real(target, context)
        return replace(limits, idle_seconds=0.2), first_token

    monkeypatch.setattr(routing_attempts, "limits_for", short)


async def test_comments_after_commit_do_not_hold_off_the_idle_limit(
    gateway: Gateway, both: tuple[int, int], short_idle: None
) -> None:
    gateway.fake.behaviours.update(
        {PRIMARY: pinging(answer_chunks()[:3]), BACKUP: streaming(answer_chunks())}
    )

    async with asyncio.timeout(3):  # pings come all the time: no read of the reply times out
        reply = await ask(gateway)

    assert text_of(reply) == "".join(TEXT)  # finished on the backup
    assert reply.body.endswith(b"data: [DONE]\n\n") and PING in reply.body
    assert gateway.fake.calls == [PRIMARY, BACKUP]
    broke = await lockout_record(store=gateway.store, provider="acme", connection_id=both[0])
    assert broke.failures[model_slot("m1", LockScope.EXACT)].consecutive == 1


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


async def test_a_regeneration_whose_finish_completes_the_sent_text_is_not_divergent(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    # the client has "The quick "; the regeneration says "The " then "quick " with its finish
    regenerated = [
        chunk({"role": "assistant", "content": "The "}),
        chunk({"content": "quick "}, "stop"),
        b"data: [DONE]\n\n",
    ]
    gateway.fake.behaviours.update({PRIMARY: cut_after(2), BACKUP: streaming(regenerated)})

    reply = await ask(gateway)

    assert text_of(reply) == "The quick "
    assert b"error" not in reply.body and reply.body.endswith(b"data: [DONE]\n\n")


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


async def test_a_stream_past_the_kept_text_is_not_continued_and_keeps_none_of_it(
    gateway: Gateway, both: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stream may run for any length: the gateway keeps only so much of its text for recovery
    # (here 12 characters), and a longer one that breaks ends honestly instead.
    monkeypatch.setattr(stream_state, "RECOVERY_TEXT_MAX_CHARS", 12)
    gateway.fake.behaviours.update({PRIMARY: cut_after(3), BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert b"upstream_stream_interrupted" in reply.body and b"[DONE]" not in reply.body
    assert text_of_without_error(reply) == "The quick brown "  # what was relayed, once
    assert gateway.fake.calls == [PRIMARY]
