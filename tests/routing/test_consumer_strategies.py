"""Combo strategies through the chat consumer: each orders the combo's
targets per request from its signals, with the random source fixed."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async

import routing.strategies.sources as strategies
from omniroute.core.store import Json
from routing.models import Combo, ModelCatalogEntry, Provider
from routing.services import catalog_entry_save, combo_save
from routing.strategies.draws import Deck
from tests.routing.combo_support import KEYS, combo_of
from tests.routing.harness import OK, UNAVAILABLE, Gateway, add_connection

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fixed_random() -> Iterator[None]:
    strategies.rng = random.Random(7)
    strategies.decks.clear()
    yield
    strategies.rng = random.Random()
    strategies.decks.clear()


async def served(gateway: Gateway, count: int) -> list[int | None]:
    replies = [await gateway.call("team") for _ in range(count)]
    assert all(r.status == 200 for r in replies)
    return [r.connection for r in replies]


@pytest.fixture
def all_ok(gateway: Gateway) -> None:
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))


async def test_round_robin_rotates_exactly(gateway: Gateway, acme: Provider, all_ok: None) -> None:
    a, b, c = await database_sync_to_async(combo_of)(acme, "round-robin")

    order = await served(gateway, 9)

    assert order == [a, b, c] * 3


async def test_round_robin_moves_on_past_a_failing_member(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, _, c = await database_sync_to_async(combo_of)(acme, "round-robin")
    gateway.fake.behaviours[KEYS[1]] = UNAVAILABLE

    order = await served(gateway, 3)

    assert order == [a, c, c]  # B's turn went on to C; then C's own turn


async def test_weighted_shares_by_weight(gateway: Gateway, acme: Provider, all_ok: None) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "weighted", (1, 1, 2))

    counts = Counter(await served(gateway, 400))

    for cid, expected in zip(ids, (100, 100, 200), strict=True):
        assert abs(counts[cid] - expected) <= expected * 0.15, counts  # 400 seeded draws


async def test_strict_random_serves_each_first_once_per_deck(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "strict-random")

    order = await served(gateway, 6)

    assert set(order[:3]) == set(ids) and set(order[3:]) == set(ids)
    assert isinstance(strategies.decks["team"], Deck)


async def test_random_reaches_every_target(gateway: Gateway, acme: Provider, all_ok: None) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "random")

    assert set(await served(gateway, 30)) == set(ids)


async def test_least_used_keeps_the_counts_within_one(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(combo_of)(acme, "least-used")

    order = await served(gateway, 31)

    counts = Counter(order)
    assert max(counts.values()) - min(counts[cid] for cid in ids) <= 1
    for n in range(1, len(order) + 1):  # at every moment, not only at the end
        running = Counter(order[:n])
        assert max(running.values()) - min(running[cid] for cid in ids) <= 1


async def test_p2c_never_puts_the_worse_of_two_first(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, c = await database_sync_to_async(combo_of)(acme, "p2c")
    signals = {a: (100, 10, 900.0), b: (100, 99, 50.0), c: (100, 98, 60.0)}  # count, ok, ms
    for cid, (count, ok, latency) in signals.items():
        record: Json = {"count": count, "ok": ok, "latency_ms": latency}
        await gateway.store.set(f"combo-metrics:team:{cid}:m1", record)

    order = await served(gateway, 60)

    assert a not in order  # whenever A was drawn, its partner scored higher and answered
    assert set(order) == {b, c}  # B and C are each drawn first at times


async def test_the_combo_s_signals_are_counted(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, _, _ = await database_sync_to_async(combo_of)(acme, "fill-first")

    await served(gateway, 3)

    record = await gateway.store.get(f"combo-metrics:team:{a}:m1")
    assert isinstance(record, dict) and (record["count"], record["ok"]) == (3, 3)


async def test_cost_optimized_asks_the_cheapest_model_first(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    def setup() -> None:
        a = add_connection(acme, "a", KEYS[0], priority=10)
        targets = [
            {"provider": acme, "model": m, "connection_id": a} for m in ("dear", "cheap", "unknown")
        ]
        combo_save(
            combo=Combo(), fields={"name": "team", "strategy": "cost-optimized"}, targets=targets
        )
        for model, price in (("dear", "10"), ("cheap", "0.5")):
            entry = ModelCatalogEntry(provider=acme, model=model)
            catalog_entry_save(entry=entry, fields={"input_price_per_mtok": price})

    await database_sync_to_async(setup)()

    await gateway.call("team")

    assert gateway.fake.sent == [(KEYS[0], "cheap")]


async def test_fill_first_keeps_the_declared_order(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, _, _ = await database_sync_to_async(combo_of)(acme, "fill-first")

    assert set(await served(gateway, 5)) == {a}
