"""A quota-share combo through the chat consumer: load shared in
proportion to the weights, and a connection at its cap demoted behind the others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async

import routing.strategies.sources as strategies
from omniroute.core.store import MemoryStore
from routing.domain.config.snapshot import (
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    ConnectionInfo,
    KeyInfo,
    ProviderInfo,
)
from routing.domain.plan.planning import RoutePlan, Target
from routing.domain.settings.quota_share import QuotaShareSettings
from routing.models import Combo, Provider
from routing.proxy.context import AttemptContext
from routing.services import combo_save
from routing.strategies.quota_share.drr import QuotaShareState
from routing.strategies.steps import order_targets
from tests.routing.harness import OK, Gateway, add_connection, read_reply
from tests.routing.test_consumer_admission import Gauge, settle, start

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = ("sk-acme-A-0001", "sk-acme-B-0002", "sk-acme-C-0003")
KEY = KeyInfo(1, "client", "sk-omr-x", frozenset(), (), frozenset(), True, None, None)


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    """Deficits and in-flight counts of this test only."""
    strategies.quota_share_state = QuotaShareState()
    yield
    strategies.quota_share_state = QuotaShareState()


def shared(acme: Provider, *, cap_of_c: int | None = None) -> tuple[int, int, int]:
    """Three connections of ``acme`` in a quota-share combo ``share`` with weights 1, 1, 2."""
    ids = (
        add_connection(acme, "a", KEYS[0], priority=10),
        add_connection(acme, "b", KEYS[1], priority=20),
        add_connection(acme, "c", KEYS[2], priority=30, max_concurrent=cap_of_c),
    )
    targets = [
        {"provider": acme, "model": "m1", "connection_id": cid, "weight": weight}
        for cid, weight in zip(ids, (1, 1, 2), strict=True)
    ]
    combo_save(combo=Combo(), fields={"name": "share", "strategy": "quota-share"}, targets=targets)
    return ids


async def test_400_requests_are_shared_1_1_2(gateway: Gateway, acme: Provider) -> None:
    ids = await database_sync_to_async(shared)(acme)
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))

    replies = [await gateway.call("share") for _ in range(400)]

    assert all(r.status == 200 for r in replies)
    counts = Counter(r.connection for r in replies)
    for cid, expected in zip(ids, (100, 100, 200), strict=True):
        assert abs(counts[cid] - expected) <= expected * 0.05, counts
    assert replies[0].decision()["strategy"] == "quota-share"


async def test_a_connection_at_its_cap_is_demoted(gateway: Gateway, acme: Provider) -> None:
    a, b, c = await database_sync_to_async(shared)(acme, cap_of_c=1)
    gauge = Gauge()
    gateway.fake.behaviours.update({KEYS[0]: OK, KEYS[1]: OK, KEYS[2]: gauge})

    held = await start(gateway, "share")  # C has the largest weight: DRR serves it first
    await gauge.until_arrived(1)  # and holds it, at its cap of 1
    others = [await gateway.call("share") for _ in range(8)]
    gauge.go.set()
    first = await read_reply(held)

    assert first.connection == c
    assert {r.connection for r in others} <= {a, b}  # C, busy at its cap, was passed over
    assert all(r.status == 200 for r in others)


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_limit_decides_whether_a_capped_connection_is_gated(enabled: bool) -> None:
    """On, a connection at its cap is left out of the share (no deficit) and ordered last;
    off, it takes part as if it had room."""
    alpha = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", "openai")
    connections = [
        ConnectionInfo(
            id=i,
            provider="alpha",
            name=f"c{i}",
            priority=i,
            base_url="x",
            auth_type="api_key",
            max_concurrent=1 if i == 3 else None,
        )
        for i in (1, 2, 3)
    ]
    targets = tuple(Target(alpha, c, "m", step) for step, c in enumerate(connections))
    steps = tuple(
        ComboStep("alpha", "m", c.id, w) for c, w in zip(connections, (1, 1, 2), strict=True)
    )
    snapshot = ConfigSnapshot(
        combos={"share": ComboInfo("share", "quota-share", steps)},
        quota_share=QuotaShareSettings(enabled=enabled),
    )
    plan = RoutePlan("share", "quota-share", targets, "share")
    context = AttemptContext.start("r1", KEY, plan, False, snapshot)
    strategies.quota_share_state.acquire(3, strategies.clock())  # connection 3 at its cap

    await order_targets(context, MemoryStore())

    deficits = strategies.quota_share_state.deficits("share")
    assert ("3:m" in deficits) is not enabled
    if enabled:
        assert [t.connection.id for t in context.plan.targets][-1] == 3
    assert len(context.on_finish) == 1  # the winner's in-flight slot, released at the end


async def test_a_quota_share_dispatch_whose_slot_wait_fails_goes_ahead_without_one(
    gateway: Gateway, acme: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import routing.proxy.guards.admission as admission

    monkeypatch.setattr(admission, "SEMAPHORE_MAX_QUEUE", 1)
    await database_sync_to_async(add_connection)(acme, "only", KEYS[0], max_concurrent=1)
    targets = [{"provider": acme, "model": "m1"}]
    fields = {"name": "solo", "strategy": "quota-share"}
    await database_sync_to_async(combo_save)(combo=Combo(), fields=fields, targets=targets)
    gauge = Gauge()
    gateway.fake.behaviours[KEYS[0]] = gauge

    running = await start(gateway, "solo")
    await gauge.until_arrived(1)
    queued = await start(gateway, "solo")  # waits for the slot
    await settle()
    failing_open = await start(gateway, "solo")  # the queue of one is full: it goes ahead
    await gauge.until_arrived(2)
    gauge.go.set()
    replies = [await read_reply(c) for c in (running, queued, failing_open)]

    assert gauge.most == 2  # fail-open: the cap was passed rather than the request refused
    assert all(r.status == 200 for r in replies)
