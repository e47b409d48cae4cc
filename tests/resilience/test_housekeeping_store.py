"""The breaker restore runs again when the store may have lost the breakers: when Redis answers
after an outage, and when it lost its data without one (the restore marker is gone).
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from omniroute.core import tasks
from omniroute.core.store import MemoryStore, RedisStore, StateStore
from omniroute.core.store.resilient import ResilientStore
from resilience.domain.breaker.machine import BreakerState
from resilience.services import housekeeping
from resilience.services.breakers import breaker_list
from resilience.services.housekeeping import RESTORE_MARKER_KEY, resilience_ready
from tests.core.store.switched import SwitchedStore
from tests.databases import redis_prefix
from tests.redis_server import running_redis
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, fail, stored
from tests.resilience.conftest import FakeClock

INTERVAL = 1.0


@pytest.mark.django_db(transaction=True)
async def test_recovery_restores_persisted_breakers(fake_clock: FakeClock) -> None:
    primary, monotonic = SwitchedStore(fake_clock), FakeClock(start=0.0)
    store = ResilientStore(
        cast(StateStore, primary), timeout=1.0, retry_interval=INTERVAL, monotonic=monotonic
    )
    await fail(store, APIKEY.failure_threshold)  # open, and written to the database
    await tasks.flush()
    await resilience_ready(store, chores=False)
    await resilience_ready(store, chores=False)

    # given: Redis goes away and comes back empty
    primary.mode = "down"
    await primary.inner.clear_prefix("")
    assert await breaker_list(store=store) == {}
    primary.mode = "up"
    monotonic.advance(INTERVAL)

    # when: the next call reaches it
    await store.get("anything")

    # then: the open breaker is back where every process sees it, restored once
    assert not store.degraded
    assert (await stored(primary.inner)).state == BreakerState.OPEN
    assert await primary.inner.get(RESTORE_MARKER_KEY) is True
    assert len(store._callbacks) == 1


@pytest.mark.django_db(transaction=True)
async def test_a_lost_marker_restores_persisted_breakers(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    await fail(store, APIKEY.failure_threshold)
    await tasks.flush()
    await resilience_ready(store, chores=False)
    assert await store.get(RESTORE_MARKER_KEY) is True

    await housekeeping._check_store(store, sweep=False)  # nothing lost: nothing to do
    await store.clear_prefix("")  # FLUSHALL
    await housekeeping._check_store(store, sweep=False)

    assert (await stored(store)).state == BreakerState.OPEN
    assert await store.get(RESTORE_MARKER_KEY) is True


async def test_the_store_is_checked_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    now, checks = [1000.0], []

    async def check(store: StateStore, *, sweep: bool) -> None:
        checks.append(sweep)

    monkeypatch.setattr(housekeeping.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(housekeeping, "_store_chores", {})
    monkeypatch.setattr(housekeeping, "_check_store", check)
    store = MemoryStore()

    async def tick(seconds: float) -> None:
        now[0] += seconds
        housekeeping._maybe_check_store(store)
        task = housekeeping._store_chores[id(store)].task
        if task is not None:
            await task

    await tick(0)  # the first request: the first check is one interval later
    await tick(housekeeping.MARKER_CHECK_INTERVAL_SECONDS - 1)
    assert checks == []
    await tick(1)
    await tick(1)
    assert checks == [False]
    await tick(housekeeping.SWEEP_INTERVAL_SECONDS)
    assert checks == [False, True]


@pytest.mark.django_db(transaction=True)
async def test_an_open_breaker_is_back_in_a_restarted_redis() -> None:
    with running_redis() as server:
        prefix, monotonic = redis_prefix(), FakeClock(start=0.0)
        store = ResilientStore(
            RedisStore(server.url, prefix=prefix),
            timeout=1.0,
            retry_interval=INTERVAL,
            monotonic=monotonic,
        )
        other = RedisStore(server.url, prefix=prefix)
        try:
            await resilience_ready(store, chores=False)
            await fail(store, APIKEY.failure_threshold)
            await tasks.flush()

            server.kill()
            assert await breaker_list(store=store) == {}  # served locally meanwhile
            await asyncio.to_thread(server.start)  # back, and empty
            monotonic.advance(INTERVAL)
            await store.get("anything")

            assert (await stored(other)).state == BreakerState.OPEN
            assert PROVIDER in await breaker_list(store=other)
        finally:
            await store.close()
            await other.close()
