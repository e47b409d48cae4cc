"""The breaker write-through and the restart path: an open breaker survives a restart,
restore never overwrites a live record, and ``resilience_ready`` restores once.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from omniroute.core import tasks
from omniroute.core.store import MemoryStore
from resilience.domain.breaker.machine import BreakerState
from resilience.models import CircuitBreaker
from resilience.persistence import persisted_breakers, policy_from_dict
from resilience.services.breakers import breaker_key, breaker_list, breaker_reset, breaker_restore
from resilience.services.housekeeping import resilience_ready
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, fail, stored
from tests.resilience.conftest import FakeClock

# --- write-through and restart ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_an_open_breaker_survives_a_restart(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    await fail(store, APIKEY.failure_threshold)
    fake_clock.advance(10)
    await tasks.flush()
    row = await CircuitBreaker.objects.aget(name=PROVIDER)
    assert (row.state, row.failure_count) == ("open", APIKEY.failure_threshold)
    assert policy_from_dict(row.options["policy"]) == APIKEY
    before = (await stored(store)).status(APIKEY, fake_clock())

    restarted = MemoryStore(clock=fake_clock)  # a new process: same database, empty store
    rows = await database_sync_to_async(persisted_breakers)()
    assert await breaker_restore(store=restarted, rows=rows) == 1

    after = (await stored(restarted)).status(APIKEY, fake_clock())
    assert after == before
    assert (after["state"], after["retryAfterMs"]) == ("open", 20_000)


@pytest.mark.django_db(transaction=True)
async def test_restore_never_overwrites_a_live_record(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    await fail(store, APIKEY.failure_threshold)
    await tasks.flush()
    rows = await database_sync_to_async(persisted_breakers)()  # OPEN
    await breaker_reset(store=store, name=PROVIDER)

    assert await breaker_restore(store=store, rows=rows) == 0
    assert (await stored(store)).state == BreakerState.CLOSED
    await tasks.flush()


@pytest.mark.django_db(transaction=True)
async def test_resilience_ready_restores_once(fake_clock: FakeClock) -> None:
    await fail(MemoryStore(clock=fake_clock), APIKEY.failure_threshold)
    await tasks.flush()
    restarted = MemoryStore(clock=fake_clock)

    await asyncio.gather(*(resilience_ready(restarted) for _ in range(5)))
    assert (await stored(restarted)).state == BreakerState.OPEN
    await restarted.delete(breaker_key(PROVIDER))
    await resilience_ready(restarted)

    assert await breaker_list(store=restarted) == {}
