"""``auto_targets`` against the state store, on both backends:
the signals it reads (combo metrics, quota snapshots, breakers, the last-known-good record,
learnt tool limits), the headers it obeys, and the exclusion records it keeps, capped by
``availability.transientCooldownCapMs``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import RedisError

import routing.strategies.sources as sources
from omniroute.core.store import Json, MemoryStore, RedisStore, StateStore
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.breaker.machine import Breaker, BreakerState
from resilience.services.breakers import breaker_key
from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import (
    CatalogEntry,
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    KeyInfo,
)
from routing.domain.plan.planning import RoutePlan, Target
from routing.domain.quota.snapshots import quota_key
from routing.proxy.context import AttemptContext
from routing.proxy.guards.combo_metrics import lkgp_key, metrics_key
from routing.strategies.auto.exclusion import ExclusionRecord
from routing.strategies.auto.targets import auto_decision, auto_targets, exclusion_key
from tests.conftest import require_service
from tests.databases import redis_prefix
from tests.routing.auto_support import BETA, Fixed, Scripted, ids, target
from tests.routing.harness import FakeClock

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
KEY = KeyInfo(1, "client", "sk-omr-x", frozenset(), (), frozenset(), True, None, None)
COMBO = "smart"
# Three targets: alpha's connections 1 and 2 (one step, "m"), beta's connection 3 ("m").
T1, T2, T3 = target(1, 0), target(2, 0), target(3, 1, provider=BETA)
STEPS = (ComboStep("alpha", "m"), ComboStep("beta", "m", connection_id=3))
CATALOG = {
    ("alpha", "m"): CatalogEntry("alpha", "m", context_window=8_000, input_price_per_mtok=3.0),
    ("beta", "m"): CatalogEntry("beta", "m", context_window=8_000, input_price_per_mtok=1.0),
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[StateStore]:
    """An empty store on ``clock``: in memory, then in Redis on a prefix of its own."""
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as error:
        require_service(f"Redis at {REDIS_URL}", error)
    finally:
        await client.aclose()
    shared = RedisStore(REDIS_URL, prefix=redis_prefix(), clock=clock)
    try:
        yield shared
    finally:
        await shared.clear_prefix("")
        await shared.close()


@pytest.fixture(autouse=True)
def no_exploration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exploration never fires unless a test swaps the rng again."""
    monkeypatch.setattr(sources, "auto_rng", Fixed())


def context(
    targets: tuple[Target, ...] = (T1, T2, T3), *, cap_ms: int = 30_000, tools: int = 0
) -> AttemptContext:
    snapshot = ConfigSnapshot(
        combos={COMBO: ComboInfo(COMBO, "auto", STEPS)},
        catalog=CATALOG,
        availability=AvailabilitySettings(transient_cooldown_cap_ms=cap_ms),
    )
    plan = RoutePlan(COMBO, "auto", targets, COMBO)
    return AttemptContext.start("r1", KEY, plan, False, snapshot, tools=tools)


async def served(store: StateStore, t: Target, count: int, ok: int, latency: float) -> None:
    record: Json = {"count": count, "ok": ok, "latency_ms": latency}
    await store.set(metrics_key(COMBO, t), record)


async def order(store: StateStore, ctx: AttemptContext | None = None, **kw: Any) -> list[int]:
    return ids(await auto_targets(ctx or context(), store, kw.pop("headers", {}), **kw))


async def test_the_combo_metrics_rank_the_targets(store: StateStore) -> None:
    await served(store, T1, 50, 10, 900.0)  # failing and slow
    await served(store, T2, 50, 50, 300.0)
    await served(store, T3, 50, 49, 250.0)
    assert await order(store) == [3, 2, 1]


async def test_the_mode_header_overrides_the_default(store: StateStore) -> None:
    await served(store, T3, 50, 5, 5_000.0)  # beta: cheapest, but failing and slow
    await served(store, T1, 50, 50, 200.0)
    await served(store, T2, 50, 50, 200.0)
    assert (await order(store))[-1] == 3
    assert (await order(store, headers={"X-OmniRoute-Mode": "eco"}))[0] == 3


async def test_a_malformed_header_is_a_400_before_any_read(store: StateStore) -> None:
    with pytest.raises(GatewayError) as raised:
        await order(store, headers={"x-omniroute-mode": "warp"})
    assert (raised.value.status, raised.value.code) == (400, "invalid_auto_mode")


async def test_a_strict_budget_nothing_fits_is_a_402(store: StateStore) -> None:
    payload = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1_000}
    headers = {"X-OmniRoute-Budget": "0.0005", "X-OmniRoute-Budget-Fallback": "strict"}
    with pytest.raises(GatewayError) as raised:
        await order(store, headers=headers, payload=payload)  # beta: ~$0.001
    assert (raised.value.status, raised.value.code) == (402, "budget_exceeded")
    headers["X-OmniRoute-Budget"] = "0.002"  # beta fits, alpha (~$0.003) does not
    assert await order(store, headers=headers, payload=payload) == [3]


async def test_the_quota_snapshot_counts(store: StateStore) -> None:
    await store.set(quota_key(1), {"percent_used": 0.97, "taken_at": 0.0})
    await store.set(quota_key(2), {"percent_used": 10, "taken_at": 0.0})  # a percentage
    only_alpha = context((T1, T2))
    assert await order(store, only_alpha) == [2, 1]


async def test_an_open_breaker_goes_to_the_tail_for_the_breaker_filter(store: StateStore) -> None:
    opened = Breaker(state=BreakerState.OPEN, failure_count=5, last_failure_at=store.clock())
    await store.set(breaker_key("beta"), opened.to_dict())
    await served(store, T3, 50, 50, 10.0)  # otherwise the best
    assert await order(store) == [1, 2, 3]


async def test_the_last_known_good_target_leads_in_lkgp_mode(store: StateStore) -> None:
    await served(store, T1, 50, 50, 100.0)
    await store.set(lkgp_key(COMBO), {"provider": "alpha", "connection": 2})
    assert (await order(store, headers={"X-OmniRoute-Mode": "lkgp"}))[0] == 2
    await store.set(lkgp_key(COMBO), {"provider": 7})  # garbage: no record, no failure
    assert (await order(store, headers={"X-OmniRoute-Mode": "lkgp"}))[0] == 1


async def test_a_learnt_tool_limit_puts_the_target_last(store: StateStore) -> None:
    await served(store, T1, 50, 50, 100.0)  # the best, but it takes 2 tools at most
    await store.set(f"tool-limit:{T1.connection.id}:{T1.model}", 2)
    assert (await order(store, context(tools=2)))[0] == 1
    assert (await order(store, context(tools=3)))[-1] == 1


async def test_exploration_uses_the_module_rng(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = await order(store)
    monkeypatch.setattr(sources, "auto_rng", Scripted([0.01, 0.99]))  # explore; pick the last
    assert await order(store) == [base[2], base[0], base[1]]


# A target made to score far below 0.2: a dear model with a tiny context window, on a
# connection out of quota, whose requests all failed slowly, behind a half-open breaker.
POOR = target(1, 1, model="slow")
POOR_CATALOG = {
    **CATALOG,
    ("alpha", "slow"): CatalogEntry("alpha", "slow", context_window=10, input_price_per_mtok=100.0),
}


def with_poor(cap_ms: int = 30_000, targets: tuple[Target, ...] = (T2, POOR)) -> AttemptContext:
    ctx = context(targets, cap_ms=cap_ms)
    ctx.facts = replace(ctx.facts, snapshot=replace(ctx.facts.snapshot, catalog=POOR_CATALOG))
    return ctx


async def make_poor(store: StateStore, count: int = 50) -> None:
    await served(store, POOR, count, 0, 60_000.0)
    await served(store, T2, 50, 50, 100.0)
    await store.set(quota_key(1), {"percent_used": 1.0, "taken_at": 0.0})
    opened = Breaker(state=BreakerState.OPEN, failure_count=5, last_failure_at=0.0)
    await store.set(breaker_key("alpha"), opened.to_dict())  # cooled down: HALF_OPEN


async def test_a_poor_target_is_excluded_within_the_cap_and_the_record_kept(
    store: StateStore, clock: FakeClock
) -> None:
    # given
    await make_poor(store)
    now = clock.now
    # when
    first = await ranked(store)
    # then
    assert first == [2]
    stored = ExclusionRecord.from_dict(await store.get(exclusion_key(COMBO, "1:slow")))
    assert stored == ExclusionRecord(now + 30, 0, 50)  # capped at 30 s: not 5 minutes
    assert await ranked(store) == [2]  # still out
    assert await order(store, with_poor()) == [2, 1]  # yet kept at the back: better than nothing
    clock.advance(31)
    assert await ranked(store) == [2, 1]  # its timer ended: back, awaiting a probe
    await make_poor(store, count=51)  # the probe failed
    assert await ranked(store) == [2]
    again = ExclusionRecord.from_dict(await store.get(exclusion_key(COMBO, "1:slow")))
    assert again == ExclusionRecord(now + 31 + 30, 1, 51)


async def ranked(store: StateStore) -> list[int]:
    """The decision's own order: the poor target's exclusion shows as its absence."""
    return ids((await auto_decision(with_poor(), store, {})).ordered)


async def test_a_larger_cap_lets_exclusions_grow_to_the_reference_s_5_minutes(
    store: StateStore, clock: FakeClock
) -> None:
    await make_poor(store)
    await order(store, with_poor(cap_ms=600_000))
    stored = ExclusionRecord.from_dict(await store.get(exclusion_key(COMBO, "1:slow")))
    assert stored == ExclusionRecord(clock.now + 300, 0, 50)


async def test_the_only_target_is_never_excluded(store: StateStore) -> None:
    await make_poor(store)
    assert await order(store, with_poor(targets=(POOR,))) == [1]
    assert await store.get(exclusion_key(COMBO, "1:slow")) is None


async def test_a_target_that_recovered_has_its_record_cleared(store: StateStore) -> None:
    expired = ExclusionRecord(store.clock() - 1, 2, 10)
    await store.set(exclusion_key(COMBO, "1:m"), expired.to_dict())
    await served(store, T1, 60, 58, 200.0)
    assert await order(store, context((T1, T2))) == [1, 2]
    assert await store.get(exclusion_key(COMBO, "1:m")) is None


async def test_without_any_signal_the_declared_order_stands(store: StateStore) -> None:
    assert await order(store, context((T1, T2))) == [1, 2]


async def test_the_decision_reports_what_was_left_out_and_why(store: StateStore) -> None:
    await make_poor(store)
    decision = await auto_decision(with_poor(), store, {})
    assert ids(decision.ordered) == [2]
    assert [(ids([e.target]), e.reason) for e in decision.excluded] == [([1], "low_score")]
    assert decision.scores["1:slow"] < 0.2 <= decision.scores["2:m"]
