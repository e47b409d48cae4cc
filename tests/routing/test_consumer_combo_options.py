"""Strategy options through the chat consumer: sticky weighted
and round-robin turns, priority's fallback-only steps, round-robin's member gates, and the
context-relay handoff."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import orjson
import pytest
from channels.db import database_sync_to_async

import routing.strategies.sources as strategies
from routing.domain.plan.planning import plan_route
from routing.domain.quota.snapshots import quota_key
from routing.models import Provider
from routing.proxy.context import AttemptContext
from routing.proxy.guards.admission import member_requirement
from routing.snapshot import current_snapshot
from routing.strategies import context_relay
from tests.routing.combo_support import KEYS, combo_of
from tests.routing.harness import (
    OK,
    UNAVAILABLE,
    Gateway,
    Reply,
    answer,
    communicator,
    error,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

DAILY_QUOTA = error(429, "Daily quota exceeded for this model", "insufficient_quota")


@pytest.fixture(autouse=True)
def fixed_random() -> Iterator[None]:
    strategies.rng = random.Random(11)
    yield
    strategies.rng = random.Random()


@pytest.fixture
def all_ok(gateway: Gateway) -> None:
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))


async def served(gateway: Gateway, count: int) -> list[int | None]:
    replies = [await gateway.call("team") for _ in range(count)]
    assert all(r.status == 200 for r in replies)
    return [r.connection for r in replies]


async def test_sticky_round_robin_serves_each_member_its_limit_in_turn(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    options = {"stickyRoundRobinLimit": 2}
    a, b, c = await database_sync_to_async(combo_of)(acme, "round-robin", options=options)

    assert await served(gateway, 8) == [a, a, b, b, c, c, a, a]


async def test_sticky_weighted_keeps_the_drawn_step_for_its_limit(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    await database_sync_to_async(combo_of)(acme, "weighted", options={"stickyWeightedLimit": 3})

    order = await served(gateway, 12)

    runs = [order[n : n + 3] for n in range(0, 12, 3)]
    assert all(len(set(run)) == 1 for run in runs), order  # three in a row, then a new draw


async def test_sticky_weighted_drops_a_step_that_fails(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(
        acme, "weighted", options={"stickyWeightedLimit": 50}
    )
    first = (await gateway.call("team")).connection
    gateway.fake.behaviours[KEYS[ids.index(first)]] = UNAVAILABLE

    moved = (await gateway.call("team")).connection
    gateway.fake.behaviours[KEYS[ids.index(first)]] = OK
    after = await served(gateway, 5)

    assert moved != first
    assert await gateway.store.get("weighted-sticky:team") is not None
    assert first not in after[:1] or after.count(after[0]) == 5  # a new sticky step, kept


async def test_a_fallback_only_step_answers_only_after_quota_ran_out(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    _, _, c = await database_sync_to_async(combo_of)(acme, "priority", flags=(False, False, True))
    gateway.fake.behaviours.update({KEYS[0]: UNAVAILABLE, KEYS[1]: UNAVAILABLE})

    refused = await gateway.call("team")

    assert refused.status == 503 and KEYS[2] not in gateway.fake.calls
    assert "fallback_only" in refused.decision()["excluded"]
    gateway.fake.behaviours.update({KEYS[0]: DAILY_QUOTA, KEYS[1]: DAILY_QUOTA})
    gateway.fake.requests.clear()

    answered = await gateway.call("team")

    assert answered.status == 200 and answered.connection == c


async def test_member_requirement_caps_each_member(gateway: Gateway, acme: Provider) -> None:
    await database_sync_to_async(combo_of)(acme, "round-robin", options={"memberConcurrency": 2})
    snapshot = await current_snapshot()
    key = next(iter(snapshot.keys_by_hash.values()))
    plan = plan_route(snapshot, "team", key)
    context = AttemptContext.start("r1", key, plan, False, snapshot)

    first = member_requirement(plan.targets[0], context)

    assert first == (f"rr:team:{plan.targets[0].connection.id}:m1", 2)


async def chat_with_session(gateway: Gateway, content: str) -> Reply:
    comm = communicator(gateway.app, gateway.key, extra_headers=[(b"x-session-id", b"s1")])
    body = {"model": "team", "messages": [{"role": "user", "content": content}]}
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm)


async def test_context_relay_hands_the_conversation_to_the_next_account(
    gateway: Gateway, acme: Provider
) -> None:
    options = {"handoffProviders": ["acme"], "handoffThreshold": 0.5}
    a, b, _ = await database_sync_to_async(combo_of)(acme, "context-relay", options=options)
    summary = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "GIST"}}]}
    nearly_spent = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "30"}
    gateway.fake.behaviours.update(
        {
            KEYS[0]: answer(200, orjson.dumps(summary), nearly_spent),
            KEYS[1]: OK,
            KEYS[2]: OK,
        }
    )

    assert (await chat_with_session(gateway, "plan the trip")).connection == a
    await asyncio.gather(*context_relay._background)
    (client,) = (await current_snapshot()).keys_by_hash.values()
    gateway_key_id = client.id

    summarised = orjson.loads(gateway.fake.requests[-1].content)
    assert "plan the trip" in summarised["messages"][0]["content"]
    record = await gateway.store.get(f"handoff:team:{gateway_key_id}:header:s1")
    assert isinstance(record, dict) and (record["from"], record["summary"]) == (a, "GIST")
    assert await gateway.store.get(quota_key(a)) is not None
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE
    gateway.fake.requests.clear()

    assert (await chat_with_session(gateway, "and the hotel?")).connection == b
    await asyncio.gather(*context_relay._background)

    handed = orjson.loads(gateway.fake.requests[-1].content)
    assert handed["messages"][0] == {
        "role": "system",
        "content": "<context_handoff>\nGIST\n</context_handoff>",
    }
    asked_a = orjson.loads(gateway.fake.requests[0].content)
    assert "context_handoff" not in str(asked_a)  # the account it came from is not told
    assert await gateway.store.get(f"handoff:team:{gateway_key_id}:header:s1") is None  # used up


async def test_context_relay_needs_a_stable_session_id(gateway: Gateway, acme: Provider) -> None:
    options = {"handoffProviders": ["acme"], "handoffThreshold": 0.5}
    await database_sync_to_async(combo_of)(acme, "context-relay", options=options)
    summary = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "GIST"}}]}
    nearly_spent = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "30"}
    gateway.fake.behaviours.update(
        dict.fromkeys(KEYS, answer(200, orjson.dumps(summary), nearly_spent))
    )

    assert (await gateway.call("team")).status == 200  # no session header: "hi" is no session
    await asyncio.gather(*context_relay._background)

    assert len(gateway.fake.requests) == 1  # no summary was asked
    assert await gateway.store.scan("handoff:") == {}
