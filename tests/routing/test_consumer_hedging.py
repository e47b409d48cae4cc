"""Hedging a slow first token through the chat consumer.

The hedge delay is real time here (``attempts.hedgeAfterMs`` lowered to a fraction of a
second); the resilience state runs on the fake clock. A slow upstream is one that holds its
response back; it notes when it is cancelled (the gateway closed its request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_record
from routing.models import Provider
from tests.routing.affinity_support import SESSION_HEADER, key_id, pinned_to
from tests.routing.combo_support import KEYS, combo_of
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    RATE_LIMITED,
    Behaviour,
    Gateway,
    Reply,
    communicator,
    error,
    read_reply,
    send_body,
)
from tests.routing.stream_support import SSE, answer_chunks, streaming, text_of

pytestmark = pytest.mark.django_db(transaction=True)

configure = database_sync_to_async(resilience_settings_update)
QUICK_HEDGE = {"attempts": {"hedgeAfterMs": 200}}
TEXT = ["From ", "the ", "hedge."]


class Slow:
    """An upstream that answers a stream only after ``seconds`` (or never), noting a
    cancellation."""

    def __init__(self, seconds: float = 30.0, then: Behaviour | None = None) -> None:
        self.seconds, self.then = seconds, then
        self.cancelled = asyncio.Event()
        self.asked = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked += 1
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        if self.then is not None:
            return await self.then(request)
        return httpx.Response(200, headers=SSE, content=_chunks(answer_chunks()))


async def _chunks(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def ask(gateway: Gateway, model: str = "acme/m1", seconds: float = 5.0) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm, seconds)


async def test_a_slow_first_token_is_hedged_on_the_next_connection(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await configure(patch=QUICK_HEDGE)
    slow = Slow()
    gateway.fake.behaviours.update({PRIMARY: slow, BACKUP: streaming(answer_chunks(TEXT))})

    reply = await ask(gateway)

    assert reply.status == 200 and text_of(reply) == "From the hedge."
    decision = reply.decision()
    assert decision["hedge"] == "1" and reply.connection == backup
    assert decision["attempts"] == "1"  # the hedge; the loser is no outcome
    assert slow.cancelled.is_set()  # its upstream request was closed
    assert gateway.fake.calls == [PRIMARY, BACKUP]


async def test_the_loser_is_neither_a_failure_nor_a_success(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await configure(patch={"attempts": {"hedgeAfterMs": 200, "hedgeMaxPercent": 100}})
    gateway.fake.behaviours.update({PRIMARY: Slow(), BACKUP: streaming(answer_chunks())})

    for _ in range(3):
        assert (await ask(gateway)).connection == backup

    assert (await gateway.state(primary)).is_clean  # no connection failure
    assert (await gateway.breaker("acme")).failure_count == 0  # no breaker count
    record = await lockout_record(store=gateway.store, provider="acme", connection_id=primary)
    assert not record.concerns("m1")  # no pair counter
    assert await gateway.store.scan("combo-metrics:") == {}  # not a combo: nothing at all


async def test_a_combo_loser_leaves_no_combo_metric(gateway: Gateway, acme: Provider) -> None:
    await configure(patch=QUICK_HEDGE)
    a, b, _ = await database_sync_to_async(combo_of)(acme, "priority")
    slow = Slow()
    gateway.fake.behaviours.update({KEYS[0]: slow, KEYS[1]: streaming(answer_chunks())})

    reply = await ask(gateway, "team")

    assert reply.connection == b and reply.decision()["hedge"] == "1"
    assert slow.cancelled.is_set()
    metrics = await gateway.store.scan("combo-metrics:")
    assert list(metrics) == [f"combo-metrics:team:{b}:m1"]  # the winner's only
    assert f"combo-metrics:team:{a}:m1" not in metrics


async def test_the_first_token_in_time_wins_without_a_hedge(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await configure(patch={"attempts": {"hedgeAfterMs": 2_000}})
    gateway.fake.behaviours.update({PRIMARY: Slow(0.2), BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert reply.connection == primary and "hedge" not in reply.decision()
    assert gateway.fake.calls == [PRIMARY]


@pytest.mark.parametrize(
    "patch",
    [{"hedgeEnabled": False, "hedgeAfterMs": 200}, {"hedgeAfterMs": 0}, {"hedgeMaxPercent": 0}],
)
async def test_hedging_turned_off_waits_for_the_first_target(
    gateway: Gateway, primary: int, backup: int, patch: dict[str, object]
) -> None:
    await configure(patch={"attempts": {"hedgeAfterMs": 200, **patch}})
    gateway.fake.behaviours.update({PRIMARY: Slow(0.8), BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert reply.connection == primary and "hedge" not in reply.decision()
    assert gateway.fake.calls == [PRIMARY]


async def test_at_most_the_share_of_a_minute_attempts_are_hedges(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await configure(patch=QUICK_HEDGE)  # 10 %: the minute's first hedge, then none for a while
    gateway.fake.behaviours.update({PRIMARY: Slow(0.6), BACKUP: streaming(answer_chunks())})

    first, second = await ask(gateway), await ask(gateway)

    assert first.connection == backup and first.decision()["hedge"] == "1"
    assert second.connection == primary and "hedge" not in second.decision()


async def test_a_single_target_is_never_hedged(gateway: Gateway, primary: int) -> None:
    await configure(patch=QUICK_HEDGE)
    gateway.fake.behaviours[PRIMARY] = Slow(0.8)

    reply = await ask(gateway)

    assert reply.connection == primary and "hedge" not in reply.decision()


async def test_a_plain_answer_is_never_hedged(gateway: Gateway, primary: int, backup: int) -> None:
    await configure(patch=QUICK_HEDGE)
    ok = error(200, "unused")  # replaced below: a JSON answer after a pause
    gateway.fake.behaviours.update({PRIMARY: Slow(0.8, then=_json_answer), BACKUP: ok})

    reply = await gateway.call()

    assert reply.status == 200 and reply.connection == primary
    assert "hedge" not in reply.decision()


async def _json_answer(request: httpx.Request) -> httpx.Response:
    body = orjson.dumps({"id": "c", "object": "chat.completion", "choices": [{"index": 0}]})
    return httpx.Response(200, headers={"content-type": "application/json"}, content=body)


async def test_a_failure_of_the_first_while_the_hedge_runs_starts_nothing_new(
    gateway: Gateway, acme: Provider
) -> None:
    await configure(patch=QUICK_HEDGE)
    await database_sync_to_async(combo_of)(acme, "priority")
    first = Slow(0.4, then=RATE_LIMITED)  # fails after the hedge started
    hedge = Slow(0.8)  # answers later
    third = Slow()
    gateway.fake.behaviours.update({KEYS[0]: first, KEYS[1]: hedge, KEYS[2]: third})

    reply = await ask(gateway, "team")

    assert reply.status == 200 and reply.decision()["hedge"] == "1"
    assert third.asked == 0  # the failure started no third attempt
    assert reply.decision()["attempts"] == "2"  # the failure and the hedge's answer


async def test_one_hedge_per_request_and_the_winner_keeps_streaming(
    gateway: Gateway, acme: Provider
) -> None:
    await configure(patch=QUICK_HEDGE)
    await database_sync_to_async(combo_of)(acme, "priority")
    first, hedge, third = Slow(), Slow(0.5), Slow()
    gateway.fake.behaviours.update({KEYS[0]: first, KEYS[1]: hedge, KEYS[2]: third})

    reply = await ask(gateway, "team")

    assert reply.status == 200 and text_of(reply) == "The quick brown fox jumps."
    assert (first.asked, hedge.asked, third.asked) == (1, 1, 0)
    assert first.cancelled.is_set()


async def test_a_cancelled_loser_gives_its_hinted_probe_back_at_once(
    gateway: Gateway, primary: int, backup: int
) -> None:
    await configure(patch={"attempts": {"hedgeAfterMs": 200, "retriesPerTarget": 0}})
    limited = error(429, "slow down", headers={"retry-after": "10"})
    gateway.fake.behaviours.update({PRIMARY: limited, BACKUP: streaming(answer_chunks())})
    assert (await ask(gateway)).connection == backup  # the primary's pair is locked 10 s
    gateway.clock.advance(11)  # the lock ended: the next request probes it
    slow = Slow()
    held = asyncio.Event()

    async def hanging(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            yield answer_chunks()[1]
            held.set()
            await asyncio.sleep(30)

        return httpx.Response(200, headers=SSE, content=body())

    gateway.fake.behaviours.update({PRIMARY: slow, BACKUP: hanging})
    comm = communicator(gateway.app, gateway.key)
    body = {"model": "acme/m1", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    await send_body(comm, orjson.dumps(body))
    start = await comm.receive_output(5)

    assert start["status"] == 200 and slow.cancelled.is_set()
    claims = await gateway.store.scan("pair-probe:hinted:")
    assert claims == {}  # given back while the hedge still streams
    await comm.send_input({"type": "http.disconnect"})
    await comm.wait(5)


async def test_a_hedge_keeps_the_session_pin(gateway: Gateway, primary: int, backup: int) -> None:
    await configure(patch={**QUICK_HEDGE, "sessionAffinity": {"ttlMs": 600_000}})
    gateway.fake.behaviours.update({PRIMARY: Slow(0), BACKUP: streaming(answer_chunks())})
    assert (await ask_in_session(gateway, "s1")).connection == primary
    assert await pinned_to(gateway.store, await key_id(), "s1") == primary
    gateway.fake.behaviours[PRIMARY] = Slow()  # slow now: the hedge answers

    reply = await ask_in_session(gateway, "s1")

    assert reply.connection == backup and reply.decision()["hedge"] == "1"
    assert await pinned_to(gateway.store, await key_id(), "s1") == primary  # only slow


async def ask_in_session(gateway: Gateway, session: str) -> Reply:
    comm = communicator(
        gateway.app, gateway.key, extra_headers=[(SESSION_HEADER, session.encode())]
    )
    body = {"model": "acme/m1", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm)
