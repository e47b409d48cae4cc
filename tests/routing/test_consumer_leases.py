"""Managed inference through the relay consumer: the lease headers, the
fence before every attempt (also after a wait at a semaphore), the plan bound to the lease, the
routes a managed key may not take, and ordinary keys kept off managed connections. Lease errors
are answered before any upstream call and never charged to a connection."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

from leases.activity import lease_activity_read
from leases.domain.states import EndReason, LeaseState
from leases.models import ExclusiveConnectionLease
from leases.selectors import lease_active
from leases.services import lease_acquire, lease_release
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_key
from resilience.services.lockout_operations import lockout_list
from routing.domain.client.endpoints import MESSAGES, RESPONSES
from routing.models import Combo, Provider, ProviderConnection
from routing.proxy.consumers import RelayConsumer
from routing.proxy.guards.admission import admission_stats
from routing.proxy.response_pins import remember
from routing.proxy.upstream.client import Upstream
from routing.services import combo_save, connection_save
from tests.routing.harness import (
    BACKUP,
    COMPLETION,
    OK,
    PRIMARY,
    RECEIVE_TIMEOUT_SECONDS,
    UNAVAILABLE,
    Gateway,
    Reply,
    add_connection,
    add_provider,
    chat,
    communicator,
    error,
    in_turn,
    read_reply,
    send_body,
    unread,
)
from tests.routing.lease_support import (
    OTHER_OWNER,
    OWNER,
    hashed,
    lease_headers,
    managed_key,
    owner_of,
)

pytestmark = pytest.mark.django_db(transaction=True)


def lease(key_id: int, connection_id: int, owner: str = OWNER) -> int:
    """An active lease of ``owner`` through the key on the connection; its generation."""
    result = lease_acquire(
        owner_hash=hashed(owner), api_key_id=key_id, provider="acme", connection_id=connection_id
    )
    assert result.lease is not None
    return result.lease.generation


async def start(
    gateway: Gateway, key: str, headers: list[tuple[bytes, bytes]], body: bytes | None = None
) -> Any:
    comm = communicator(gateway.app, key, extra_headers=headers)
    await send_body(comm, body or chat())
    return comm


async def call(
    gateway: Gateway, key: str, headers: list[tuple[bytes, bytes]], body: bytes | None = None
) -> Reply:
    return await read_reply(await start(gateway, key, headers, body))


def code(reply: Reply) -> tuple[int, str]:
    error = reply.json()["error"]
    return reply.status, error["code"]


@pytest.fixture
async def managed(gateway: Gateway, both: tuple[int, int]) -> tuple[int, str]:
    """A managed key on ``primary`` and ``backup`` (both then leave the ordinary pool)."""
    gateway.fake.behaviours.update({PRIMARY: OK, BACKUP: OK})
    found: tuple[int, str] = await database_sync_to_async(managed_key)(both)
    return found


# --- the headers and the lease, before any upstream call ---------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (lease_headers(None, None), (400, "LEASE_CONTEXT_REQUIRED")),
        (lease_headers(None, 1), (400, "LEASE_CONTEXT_REQUIRED")),
        (lease_headers(OWNER, None), (400, "LEASE_CONTEXT_INVALID")),  # an owner, no generation
        (lease_headers(OWNER, ""), (400, "LEASE_CONTEXT_INVALID")),
        (lease_headers(OWNER, "abc"), (400, "LEASE_CONTEXT_INVALID")),
        (lease_headers("vlo_nope", 1), (400, "LEASE_CONTEXT_INVALID")),
        (lease_headers(OWNER, "01"), (400, "LEASE_CONTEXT_INVALID")),
        (lease_headers(OWNER, 1), (409, "LEASE_REQUIRED")),  # no lease at all
    ],
)
async def test_a_managed_request_without_a_valid_lease_never_reaches_the_upstream(
    gateway: Gateway,
    managed: tuple[int, str],
    headers: list[tuple[bytes, bytes]],
    expected: tuple[int, str],
) -> None:
    reply = await call(gateway, managed[1], headers)
    assert code(reply) == expected
    assert reply.json()["error"]["type"] == "lease_error"
    assert gateway.fake.requests == []


async def test_a_valid_lease_is_served_by_its_bound_connection(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    backup = both[1]
    generation = await database_sync_to_async(lease)(managed[0], backup)

    for _ in range(2):  # a success does not end the lease
        reply = await call(gateway, managed[1], lease_headers(OWNER, generation))
        assert (reply.status, reply.connection) == (200, backup)

    assert gateway.fake.calls == [BACKUP, BACKUP]  # not the primary, though it comes first


async def test_each_managed_request_counts_on_its_lease(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int], process_store: None
) -> None:
    generation = await database_sync_to_async(lease)(managed[0], both[1])

    for _ in range(2):
        assert (await call(gateway, managed[1], lease_headers(OWNER, generation))).status == 200

    held = await database_sync_to_async(lease_active)(owner_hash=hashed(OWNER))
    assert held is not None
    use = (await lease_activity_read(lease_ids=[held.id]))[held.id]
    assert (use.request_count, use.active) == (2, True)  # what GET /api/sessions shows


async def test_a_stale_generation_or_another_key_is_409_lease_fence_stale(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    generation = await database_sync_to_async(lease)(managed[0], both[0])
    other = await database_sync_to_async(managed_key)(both, "other")

    stale = await call(gateway, managed[1], lease_headers(OWNER, generation + 1))
    replayed = await call(gateway, other[1], lease_headers(OWNER, generation))

    assert code(stale) == code(replayed) == (409, "LEASE_FENCE_STALE")
    assert gateway.fake.requests == []


async def test_the_binding_moves_with_its_generation_when_it_cannot_serve(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, backup = both
    generation = await database_sync_to_async(lease)(managed[0], primary)
    cooling = ConnectionState(rate_limited_until=gateway.clock.now + 60, timer="operator")
    await gateway.store.set(connection_key(primary), cooling.to_dict())

    reply = await call(gateway, managed[1], lease_headers(OWNER, generation))

    assert (reply.status, reply.connection) == (200, backup)
    moved = await database_sync_to_async(lease_active)(owner_hash=hashed(OWNER))
    assert moved is not None and (moved.connection_id, moved.generation) == (backup, generation)
    old = await ExclusiveConnectionLease.objects.aget(connection_id=primary)
    assert (old.state, old.end_reason) == (LeaseState.INVALIDATED, EndReason.CONNECTION_INELIGIBLE)


async def test_the_client_s_own_mistake_keeps_the_lease_where_it_is(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, _ = both
    generation = await database_sync_to_async(lease)(managed[0], primary)
    gateway.fake.behaviours[PRIMARY] = error(
        400, "context length exceeded", "context_length_exceeded"
    )

    reply = await call(gateway, managed[1], lease_headers(OWNER, generation))

    assert reply.status == 400 and gateway.fake.calls == [PRIMARY]  # the backup is not asked
    kept = await database_sync_to_async(lease_active)(owner_hash=hashed(OWNER))
    assert kept is not None and kept.connection_id == primary


async def test_a_short_hint_is_waited_out_on_the_binding_and_the_lease_stays(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, _ = both
    generation = await database_sync_to_async(lease)(managed[0], primary)
    briefly = error(429, "slow down", "rate_limit_exceeded", {"retry-after": "2"})
    gateway.fake.behaviours[PRIMARY] = in_turn(briefly, OK)

    reply = await call(gateway, managed[1], lease_headers(OWNER, generation))

    # the backup serves the same model, but the lease moves only off an ineligible binding
    assert (reply.status, reply.connection) == (200, primary)
    assert gateway.fake.calls == [PRIMARY, PRIMARY]
    kept = await database_sync_to_async(lease_active)(owner_hash=hashed(OWNER))
    assert kept is not None and kept.connection_id == primary


async def test_a_connection_another_owner_holds_is_never_tried(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, backup = both
    await database_sync_to_async(lease)(managed[0], primary, OTHER_OWNER)
    generation = await database_sync_to_async(lease)(managed[0], backup)
    gateway.fake.behaviours[BACKUP] = UNAVAILABLE

    reply = await call(gateway, managed[1], lease_headers(OWNER, generation))

    assert reply.status == 503
    assert PRIMARY not in gateway.fake.calls


def bravo_connection() -> int:
    return add_connection(add_provider("bravo"), "b", "sk-bravo-0001")


async def test_every_free_connection_held_by_others_is_429_with_retry_after(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    primary, backup = both
    bravo = await database_sync_to_async(bravo_connection)()
    key_id, key = await database_sync_to_async(managed_key)([primary, backup, bravo])
    await database_sync_to_async(lease)(key_id, primary, OTHER_OWNER)
    await database_sync_to_async(lease)(key_id, backup, owner_of("third"))
    generation = await database_sync_to_async(lease)(key_id, bravo)  # not serving acme/m1

    reply = await call(gateway, key, lease_headers(OWNER, generation))

    assert code(reply) == (429, "LEASE_CAPACITY_UNAVAILABLE")
    assert 119 <= int(reply.headers["retry-after"]) <= 120  # the others' fresh 120 s leases
    body = reply.json()
    assert (body["state"], body["eligibleCount"], body["freeCount"]) == (
        "WAITING_FOR_CAPACITY",
        2,
        0,
    )
    assert gateway.fake.requests == []


# --- the fence right before dispatch -------------------------------------------------------------


class Held:
    """An upstream that holds each request until ``go``."""

    def __init__(self) -> None:
        self.go, self.arrived = asyncio.Event(), asyncio.Event()
        self.count = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        self.arrived.set()
        await asyncio.wait_for(self.go.wait(), RECEIVE_TIMEOUT_SECONDS)
        return unread(200, orjson.dumps(COMPLETION))


POLLS = 1_000


async def queued_at(gate: str) -> None:
    """Until a request waits at ``gate``. It reads its lease on Django's sync thread on the way,
    so there is no event to await: the admission stats are polled, briefly."""
    for _ in range(POLLS):
        if any(g["gate"] == gate and g["queued"] for g in admission_stats()["gates"]):
            return
        await asyncio.sleep(RECEIVE_TIMEOUT_SECONDS / POLLS)
    raise AssertionError(f"nothing queued at {gate}")


async def test_a_lease_released_during_a_semaphore_wait_is_409_with_no_dispatch(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, _ = both
    connection = await ProviderConnection.objects.aget(pk=primary)
    await database_sync_to_async(connection_save)(
        connection=connection, fields={"max_concurrent": 1}
    )
    generation = await database_sync_to_async(lease)(managed[0], primary)
    held = Held()
    gateway.fake.behaviours[PRIMARY] = held
    headers = lease_headers(OWNER, generation)
    first = await start(gateway, managed[1], headers)
    await asyncio.wait_for(held.arrived.wait(), RECEIVE_TIMEOUT_SECONDS)
    second = await start(gateway, managed[1], headers)
    await queued_at(f"conn:{primary}")

    await database_sync_to_async(lease_release)(
        owner_hash=hashed(OWNER), generation=generation, api_key_id=managed[0]
    )
    held.go.set()

    assert (await read_reply(first)).status == 200
    refused = await read_reply(second)
    assert code(refused) == (409, "LEASE_REQUIRED")
    assert held.count == 1  # the waiting request was never dispatched
    assert (await gateway.state(primary)).remaining(gateway.clock.now) == 0  # nothing charged
    assert (await gateway.breaker("acme")).failure_count == 0
    assert await lockout_list(store=gateway.store) == []


# --- routes and endpoints ------------------------------------------------------------------


async def test_fan_out_and_foreign_pinned_combos_are_refused_before_dispatch(
    gateway: Gateway, acme: Provider, managed: tuple[int, str], both: tuple[int, int]
) -> None:
    primary, backup = both
    generation = await database_sync_to_async(lease)(managed[0], primary)
    steps = [{"provider": acme, "model": "m1", "connection_id": c} for c in (primary, backup)]
    await database_sync_to_async(combo_save)(
        combo=Combo(), fields={"name": "apart", "strategy": "priority"}, targets=steps
    )
    await database_sync_to_async(combo_save)(
        combo=Combo(), fields={"name": "there", "strategy": "priority"}, targets=steps[1:]
    )
    await database_sync_to_async(combo_save)(
        combo=Combo(), fields={"name": "relay", "strategy": "context-relay"}, targets=steps[:1]
    )
    headers = lease_headers(OWNER, generation)

    apart = await call(gateway, managed[1], headers, chat("apart"))
    relay = await call(gateway, managed[1], headers, chat("relay"))
    there = await call(gateway, managed[1], headers, chat("there"))

    assert code(apart) == code(relay) == (409, "LEASE_UNSUPPORTED_ROUTE")
    assert code(there) == (409, "LEASE_CONNECTION_MISMATCH")
    assert gateway.fake.requests == []


@pytest.mark.parametrize("answered_on", ["primary", "backup"])
async def test_continuing_a_response_another_connection_gave_is_409_and_the_lease_stays(
    gateway: Gateway, managed: tuple[int, str], both: tuple[int, int], answered_on: str
) -> None:
    """A ``previous_response_id`` binds the request to the connection that gave the response,
    as a pinned combo step does: on the bound connection it is served; on another it is a
    forced connection that is not the binding, and the lease does not move for it."""
    primary, backup = both
    generation = await database_sync_to_async(lease)(managed[0], primary)
    pinned_to = primary if answered_on == "primary" else backup
    await remember(gateway.store, "resp_earlier", pinned_to)
    upstream = Upstream(httpx.MockTransport(gateway.fake))
    app = RelayConsumer.as_asgi(upstream=upstream, store=gateway.store, endpoint=RESPONSES)
    body = orjson.dumps({"model": "acme/m1", "input": "hi", "previous_response_id": "resp_earlier"})
    comm = communicator(
        app, managed[1], path="/v1/responses", extra_headers=lease_headers(OWNER, generation)
    )
    await send_body(comm, body)

    reply = await read_reply(comm)

    active = await database_sync_to_async(lease_active)(owner_hash=hashed(OWNER))
    assert active is not None
    assert (active.connection_id, active.generation) == (primary, generation)
    if answered_on == "primary":
        assert reply.status == 200
        assert len(gateway.fake.requests) == 1
    else:
        assert code(reply) == (409, "LEASE_CONNECTION_MISMATCH")
        assert gateway.fake.requests == []


def anthropic_connection() -> int:
    return add_connection(add_provider("anth", wire_format="anthropic"), "a", "sk-anth-0001")


@pytest.mark.parametrize(
    ("endpoint", "path", "model"),
    [(RESPONSES, "/v1/responses", "acme/m1"), (MESSAGES, "/v1/messages", "anth/m1")],
    ids=["responses", "messages"],
)
async def test_every_inference_endpoint_needs_the_lease(
    gateway: Gateway, both: tuple[int, int], endpoint: Any, path: str, model: str
) -> None:
    anth = await database_sync_to_async(anthropic_connection)()
    _, key = await database_sync_to_async(managed_key)([*both, anth])
    upstream = Upstream(httpx.MockTransport(gateway.fake))
    app = RelayConsumer.as_asgi(upstream=upstream, store=gateway.store, endpoint=endpoint)
    body = orjson.dumps(
        {
            "model": model,
            "input": "hi",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    for headers, expected in (
        (lease_headers(None, None), (400, "LEASE_CONTEXT_REQUIRED")),
        (lease_headers(OWNER, 1), (409, "LEASE_REQUIRED")),
    ):
        comm = communicator(app, key, path=path, extra_headers=headers)
        await send_body(comm, body)
        reply = await read_reply(comm)
        assert code(reply) == expected
    assert gateway.fake.requests == []


async def test_ordinary_keys_never_land_on_a_managed_connection(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    primary = both[0]
    await database_sync_to_async(managed_key)([primary])
    gateway.fake.behaviours.update({PRIMARY: OK, BACKUP: UNAVAILABLE})

    reply = await gateway.call()

    assert reply.status == 503  # the backup's own failure: the primary is not theirs to try
    assert gateway.fake.calls and set(gateway.fake.calls) == {BACKUP}
