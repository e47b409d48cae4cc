"""The combo strategies that read signals beyond request counts, through the chat consumer:
the last good target, the catalog's context
windows, the prompt's cache key, and the accounts' quota snapshots."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async

import routing.strategies.sources as quota_strategies
from routing.domain.quota.snapshots import QuotaSnapshot, QuotaWindow, quota_key
from routing.models import Combo, ModelCatalogEntry, Provider
from routing.services import catalog_entry_save, combo_save
from tests.routing.combo_support import KEYS, combo_of
from tests.routing.harness import (
    COMPLETION,
    OK,
    UNAVAILABLE,
    Gateway,
    Reply,
    add_connection,
    answer,
    communicator,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

NOW = 1_800_000_000.0
HOUR = 3600.0


@pytest.fixture(autouse=True)
def quota_clock() -> Iterator[None]:
    quota_strategies.wall_clock = lambda: NOW
    yield
    quota_strategies.wall_clock = time.time


@pytest.fixture
def all_ok(gateway: Gateway) -> None:
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))


async def call(gateway: Gateway, body: dict[str, Any]) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, orjson.dumps({"model": "team", **body}))
    return await read_reply(comm)


def first_asked(gateway: Gateway) -> str:
    return gateway.fake.calls[-1]


async def test_lkgp_starts_from_the_target_that_answered_last(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, _ = await database_sync_to_async(combo_of)(acme, "lkgp")
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE
    assert (await gateway.call("team")).connection == b
    gateway.fake.behaviours[KEYS[0]] = OK
    gateway.fake.requests.clear()

    reply = await gateway.call("team")

    assert reply.connection == b and gateway.fake.calls == [KEYS[1]]
    assert await gateway.store.get("lkgp:team") == {"provider": "acme", "connection": b}
    assert a != b


async def test_context_optimized_asks_the_largest_window_first(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    def setup() -> None:
        a = add_connection(acme, "a", KEYS[0])
        targets = [{"provider": acme, "model": m, "connection_id": a} for m in ("small", "big")]
        combo_save(
            combo=Combo(), fields={"name": "team", "strategy": "context-optimized"}, targets=targets
        )
        for model, window in (("small", 8_000), ("big", 200_000)):
            entry = ModelCatalogEntry(provider=acme, model=model)
            catalog_entry_save(entry=entry, fields={"context_window": window})

    await database_sync_to_async(setup)()

    await gateway.call("team")

    assert gateway.fake.sent == [(KEYS[0], "big")]


async def test_cache_optimized_keeps_a_cache_key_on_one_account(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    await database_sync_to_async(combo_of)(acme, "cache-optimized")
    messages = [{"role": "user", "content": "hi"}]

    for _ in range(5):
        assert (await call(gateway, {"messages": messages, "prompt_cache_key": "k1"})).status == 200
    assert len(set(gateway.fake.calls)) == 1
    gateway.fake.requests.clear()
    for n in range(30):
        await call(gateway, {"messages": messages, "prompt_cache_key": f"key-{n}"})

    assert len(set(gateway.fake.calls)) == 3  # other keys spread over every account


def snapshot(used: dict[str, tuple[float, float]], limit: bool = False) -> dict[str, Any]:
    windows = {
        name: QuotaWindow(share, NOW + hours * HOUR) for name, (share, hours) in used.items()
    }
    top = max(share for share, _ in used.values())
    return QuotaSnapshot(top, None, limit, windows, taken_at=NOW - 60).to_record()


async def set_quota(gateway: Gateway, ids: list[int], records: list[dict[str, Any]]) -> None:
    for cid, record in zip(ids, records, strict=True):
        await gateway.store.set(quota_key(cid), record)


async def test_reset_aware_prefers_the_account_with_quota_to_spare(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "reset-aware")
    await set_quota(
        gateway,
        ids,
        [
            snapshot({"session": (0.9, 4), "weekly": (0.9, 100)}),
            snapshot({"session": (0.1, 4), "weekly": (0.1, 100)}),
            snapshot({"session": (1.0, 4), "weekly": (1.0, 100)}, limit=True),
        ],
    )

    await gateway.call("team")

    assert first_asked(gateway) == KEYS[1]


async def test_reset_window_spends_the_soonest_reset_first(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "reset-window")
    await set_quota(
        gateway,
        ids,
        [
            snapshot({"weekly": (0.5, 100)}),
            snapshot({"weekly": (0.5, 30)}),
            snapshot({"weekly": (0.5, 60)}),
        ],
    )

    await gateway.call("team")

    assert first_asked(gateway) == KEYS[1]


async def test_headroom_asks_the_least_used_account_first(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "headroom")
    await set_quota(
        gateway,
        ids,
        [
            snapshot({"session": (0.2, 4), "weekly": (0.7, 100)}),
            snapshot({"session": (0.5, 4), "weekly": (0.6, 100)}),
            snapshot({"session": (0.3, 4), "weekly": (0.1, 100)}),
        ],
    )

    await gateway.call("team")

    assert first_asked(gateway) == KEYS[2]


async def test_a_reset_that_passed_since_the_reading_frees_the_window(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "headroom")
    await set_quota(
        gateway,
        ids,
        [
            snapshot(
                {"session": (0.9, -1), "weekly": (0.05, 100)}
            ),  # its session reset an hour ago
            snapshot({"session": (0.5, 4), "weekly": (0.5, 100)}),
            snapshot({"session": (0.6, 4), "weekly": (0.6, 100)}),
        ],
    )

    await gateway.call("team")

    assert first_asked(gateway) == KEYS[0]


RATE_LIMITED_HEADERS = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "25",
    "x-ratelimit-reset-requests": "30s",
}


@pytest.mark.parametrize(("strategy", "kept"), [("headroom", True), ("priority", False)])
async def test_quota_snapshots_are_read_off_the_answers_rate_limit_headers(
    gateway: Gateway, acme: Provider, strategy: str, kept: bool
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, strategy)
    answered = answer(200, orjson.dumps(COMPLETION), RATE_LIMITED_HEADERS)
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, answered))

    reply = await gateway.call("team")

    found = QuotaSnapshot.from_record(await gateway.store.get(quota_key(reply.connection or 0)))
    if not kept:  # no combo reads acme's quota: no store write per answer
        assert found is None
        return
    assert found is not None and found.percent_used == pytest.approx(0.75)
    assert [await gateway.store.get(quota_key(cid)) is None for cid in ids].count(True) == 2


async def test_the_decision_names_the_strategy_and_the_target(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    _, b, _ = await database_sync_to_async(combo_of)(acme, "priority")
    gateway.fake.behaviours[KEYS[0]] = UNAVAILABLE

    decision = (await gateway.call("team")).decision()

    assert decision["strategy"] == "priority" and decision["target"] == "acme/m1"
    assert decision["connection"] == str(b)
