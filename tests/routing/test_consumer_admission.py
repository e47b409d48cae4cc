"""Admission through the chat consumer: caps
that hold, a queue that says no early, an execution limit, and a waiter that leaves with its
client; every local error request-scoped. ``httpx.MockTransport`` plays the upstream; its
answers are held on events, so nothing sleeps on the wall clock."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async
from prometheus_client import REGISTRY

from resilience.services import resilience_settings_update
from resilience.services.lockout_operations import lockout_list
from routing.models import Provider, ProviderConnection
from routing.proxy.guards.admission import (
    ConcurrencyHolder,
    RequestQueueHolder,
    admission_stats,
)
from routing.proxy.guards.lease import LeaseFenceHolder
from routing.services import connection_save, provider_save
from tests.routing.harness import (
    BACKUP,
    COMPLETION,
    OK,
    PRIMARY,
    RECEIVE_TIMEOUT_SECONDS,
    Gateway,
    Reply,
    chat,
    communicator,
    read_reply,
    send_body,
    unread,
)
from tests.routing.stream_support import SSE, answer_chunks

pytestmark = pytest.mark.django_db(transaction=True)

FAST_QUEUE = {"minTimeBetweenRequestsMs": 0, "requestsPerMinute": 1_000_000}


class Gauge:
    """An upstream whose answers wait for ``go``; it counts what is in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.arrived = 0
        self.go = asyncio.Event()
        self.seen = asyncio.Event()  # set at each arrival

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.arrived += 1
        self.most = max(self.most, self.in_flight)
        self.seen.set()
        try:
            await asyncio.wait_for(self.go.wait(), RECEIVE_TIMEOUT_SECONDS)
            return unread(200, orjson.dumps(COMPLETION))
        finally:
            self.in_flight -= 1

    async def until_arrived(self, count: int) -> None:
        async with asyncio.timeout(RECEIVE_TIMEOUT_SECONDS):
            while self.arrived < count:
                self.seen.clear()
                await self.seen.wait()


def update(connection_id: int, **fields: Any) -> None:
    connection = ProviderConnection.objects.get(pk=connection_id)
    connection_save(connection=connection, fields=fields)


async def settle() -> None:
    """Let every runnable task run (requests reach their queue or the upstream)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def start(gateway: Gateway, model: str = "acme/m1") -> Any:
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat(model))
    return comm


async def burst(
    gateway: Gateway, gauge: Gauge, count: int, *, first: int = 1
) -> tuple[int, list[Reply]]:
    """``count`` requests at once: how many reached the upstream while it held them (once
    ``first`` had and the rest had settled), and every reply once it let them go."""
    comms = [await start(gateway) for _ in range(count)]
    await gauge.until_arrived(first)
    await settle()
    arrived = gauge.arrived
    gauge.go.set()
    return arrived, [await read_reply(c) for c in comms]


async def queue_settings(**values: Any) -> None:
    patch = {"requestQueue": {**FAST_QUEUE, **values}}
    await database_sync_to_async(resilience_settings_update)(patch=patch)


# --- account semaphores: max_concurrent -----------------------------------------------------


async def test_max_concurrent_1_lets_one_request_in_at_a_time_and_all_succeed(
    gateway: Gateway, primary: int
) -> None:
    await database_sync_to_async(update)(primary, max_concurrent=1)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    waiting_at_once, replies = await burst(gateway, gauge, 20)

    assert waiting_at_once == 1  # the other 19 wait in the gateway, not upstream
    assert [r.status for r in replies] == [200] * 20
    assert gauge.most == 1 and gauge.arrived == 20


def gate_waits() -> float:
    """How many gate waits the admission histogram observed for ``acme``."""
    sample = REGISTRY.get_sample_value(
        "omniroute_admission_wait_seconds_count", {"kind": "gate", "provider": "acme"}
    )
    return sample or 0.0


async def test_only_an_attempt_a_gate_applies_to_observes_a_gate_wait(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = OK
    before = gate_waits()
    assert (await gateway.call()).status == 200  # no cap: no gate
    assert gate_waits() == before

    await database_sync_to_async(update)(primary, max_concurrent=1)
    assert (await gateway.call()).status == 200

    assert gate_waits() == before + 1


async def test_an_attempt_acquires_only_what_applies_to_it(
    gateway: Gateway, primary: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: every holder's acquisition counted
    acquired: collections.Counter[str] = collections.Counter()
    for holder in (ConcurrencyHolder, RequestQueueHolder, LeaseFenceHolder):
        original = holder.acquire

        async def counting(self: Any, target: Any, context: Any, original: Any = original) -> Any:
            acquired[type(self).__name__] += 1
            return await original(self, target, context)

        monkeypatch.setattr(holder, "acquire", counting)
    gateway.fake.behaviours[PRIMARY] = OK

    # when / then: no cap, no queue, no lease: nothing to acquire (and no deadline timer for it)
    assert (await gateway.call()).status == 200
    assert acquired == {}

    # when / then: a cap: its gate only
    await database_sync_to_async(update)(primary, max_concurrent=1)
    assert (await gateway.call()).status == 200
    assert acquired == {"ConcurrencyHolder": 1}


async def test_a_model_cap_holds_per_model_while_other_models_pass(
    gateway: Gateway, primary: int
) -> None:
    overrides = {"modelConcurrency": {"m1": 1}}
    await database_sync_to_async(update)(primary, rate_limit_overrides=overrides)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    capped = [await start(gateway, "acme/m1") for _ in range(3)]
    free = [await start(gateway, "acme/m2") for _ in range(3)]
    await gauge.until_arrived(4)
    await settle()
    arrived = gauge.arrived
    gauge.go.set()
    replies = [await read_reply(c) for c in capped + free]

    assert arrived == 4  # one m1, three m2
    assert all(r.status == 200 for r in replies)


async def test_a_full_semaphore_queue_fails_over_to_the_next_connection(
    gateway: Gateway, both: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    import routing.proxy.guards.admission as admission

    monkeypatch.setattr(admission, "SEMAPHORE_MAX_QUEUE", 1)
    primary, backup = both
    await database_sync_to_async(update)(primary, max_concurrent=1)
    gauge = Gauge()
    gateway.fake.behaviours.update({PRIMARY: gauge, BACKUP: OK})

    running, queued = await start(gateway), await start(gateway)
    await gauge.until_arrived(1)
    await settle()
    third = await read_reply(await start(gateway))  # the queue of one is taken
    gauge.go.set()
    others = [await read_reply(running), await read_reply(queued)]

    assert third.status == 200 and third.connection == backup
    assert [r.connection for r in others] == [primary, primary]
    assert await gateway.cooling_for(primary) == 0  # a local refusal charges no one


# --- the request queue ----------------------------------------------------------------------


async def test_past_max_queue_depth_the_next_caller_is_refused_at_once(
    gateway: Gateway, primary: int
) -> None:
    await queue_settings(concurrentRequests=1, maxQueueDepth=2)
    await database_sync_to_async(update)(primary, rate_limit_protection=True)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    running = await start(gateway)
    await gauge.until_arrived(1)
    waiting = [await start(gateway) for _ in range(2)]
    await settle()
    refused = await read_reply(await start(gateway))
    gauge.go.set()
    served = [await read_reply(c) for c in (running, *waiting)]

    assert refused.status == 429
    assert refused.json()["error"]["code"] == "RATE_LIMIT_QUEUE_FULL"
    assert "maxQueueDepth" in refused.json()["error"]["message"]
    assert [r.status for r in served] == [200, 200, 200]
    assert gauge.arrived == 3  # the refused one never reached the upstream
    assert gauge.most == 1
    assert await gateway.cooling_for(primary) == 0


async def test_an_upstream_slower_than_max_wait_is_a_local_504_and_charges_no_one(
    gateway: Gateway, primary: int
) -> None:
    await queue_settings(maxWaitMs=50)
    await database_sync_to_async(update)(primary, rate_limit_protection=True)
    gauge = Gauge()  # never let go: slower than any limit
    gateway.fake.behaviours[PRIMARY] = gauge

    reply = await read_reply(await start(gateway))
    gauge.go.set()

    assert reply.status == 504
    assert reply.json()["error"]["code"] == "RATE_LIMIT_EXECUTION_TIMEOUT"
    assert await gateway.cooling_for(primary) == 0
    assert (await gateway.breaker("acme")).state.name == "CLOSED"
    assert await lockout_list(store=gateway.store) == []


async def test_the_execution_limit_fails_over_like_a_timeout(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    primary, backup = both
    await queue_settings(maxWaitMs=50)
    await database_sync_to_async(update)(primary, rate_limit_protection=True)
    gauge = Gauge()
    gateway.fake.behaviours.update({PRIMARY: gauge, BACKUP: OK})

    reply = await read_reply(await start(gateway))
    gauge.go.set()

    assert (reply.status, reply.connection) == (200, backup)


async def test_connections_without_protection_skip_the_queue(
    gateway: Gateway, primary: int
) -> None:
    await queue_settings(concurrentRequests=1, maxQueueDepth=1)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    comms = [await start(gateway) for _ in range(4)]
    await gauge.until_arrived(4)
    gauge.go.set()
    replies = [await read_reply(c) for c in comms]

    assert [r.status for r in replies] == [200] * 4


async def test_auto_enable_queues_api_key_connections(gateway: Gateway, primary: int) -> None:
    await queue_settings(autoEnableApiKeyProviders=True, concurrentRequests=1)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    arrived, replies = await burst(gateway, gauge, 3)

    assert arrived == 1 and gauge.most == 1
    assert [r.status for r in replies] == [200] * 3


# --- a waiter whose client leaves -----------------------------------------------------------


async def test_a_waiting_request_whose_client_leaves_never_reaches_the_upstream(
    gateway: Gateway, primary: int
) -> None:
    await database_sync_to_async(update)(primary, max_concurrent=1)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    running = await start(gateway)
    await gauge.until_arrived(1)
    leaving = await start(gateway)
    await settle()
    await leaving.send_input({"type": "http.disconnect"})
    await leaving.wait(RECEIVE_TIMEOUT_SECONDS)
    gauge.go.set()
    first = await read_reply(running)
    after: Reply = await read_reply(await start(gateway))  # the slot is free again

    assert (first.status, after.status) == (200, 200)
    assert gauge.arrived == 2  # the one that left never went up


# --- a stream holds its slot until it ends ----------------------------------------------------


async def test_a_stream_holds_its_slot_until_it_ends(gateway: Gateway, primary: int) -> None:
    await database_sync_to_async(update)(primary, max_concurrent=1)
    release = asyncio.Event()
    chunks = answer_chunks()
    calls: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        yield b"".join(chunks[:2])  # the role delta and the first token: committed
        await asyncio.wait_for(release.wait(), RECEIVE_TIMEOUT_SECONDS)
        yield b"".join(chunks[2:])

    async def behaviour(request: httpx.Request) -> httpx.Response:
        calls.append(len(calls))
        if not orjson.loads(request.content)["stream"]:
            return unread(200, orjson.dumps(COMPLETION))
        return httpx.Response(200, headers=SSE, content=body())

    gateway.fake.behaviours[PRIMARY] = behaviour
    streaming_comm = communicator(gateway.app, gateway.key)
    await send_body(streaming_comm, chat(stream=True))
    await streaming_comm.receive_output(RECEIVE_TIMEOUT_SECONDS)  # headers: the stream is on
    second = await start(gateway)
    await settle()
    during = len(calls)
    release.set()
    streamed = await read_reply_rest(streaming_comm)
    after = await read_reply(second)

    assert during == 1  # the second request waited while the stream held the slot
    assert streamed.endswith(b"data: [DONE]\n\n")
    assert after.status == 200 and len(calls) == 2


async def read_reply_rest(comm: Any) -> bytes:
    """The rest of a reply whose start was read already."""
    parts = []
    while True:
        event = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)
        parts.append(event["body"])
        if not event.get("more_body"):
            return b"".join(parts)


# --- what health shows ------------------------------------------------------------------------


async def test_health_shows_running_and_queued_per_gate(gateway: Gateway, primary: int) -> None:
    await database_sync_to_async(update)(primary, max_concurrent=1)
    gauge = Gauge()
    gateway.fake.behaviours[PRIMARY] = gauge

    comms = [await start(gateway) for _ in range(3)]
    await gauge.until_arrived(1)
    await settle()
    during = admission_stats()["gates"]
    gauge.go.set()
    for comm in comms:
        await read_reply(comm)
    after = admission_stats()["gates"]

    gate = f"conn:{primary}"
    assert {"gate": gate, "running": 1, "queued": 2, "cap": 1, "blocked": False} in during
    assert not any(g["gate"] == gate for g in after)  # idle gates are forgotten


def set_provider_cap(slug: str, cap: int) -> None:
    provider = Provider.objects.get(slug=slug)
    provider_save(provider=provider, fields={"max_concurrent": cap})


async def test_a_provider_cap_holds_over_all_its_connections(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    await database_sync_to_async(set_provider_cap)("acme", 1)
    gauge = Gauge()
    gateway.fake.behaviours.update({PRIMARY: gauge, BACKUP: gauge})

    arrived, replies = await burst(gateway, gauge, 3)

    assert arrived == 1 and gauge.most == 1
    assert [r.status for r in replies] == [200] * 3
