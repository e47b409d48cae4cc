"""The breaker services on every store backend with a fake clock: acquire and counting
(no record for a healthy provider, de-duplication windows, dropping failures while open, lazy
half-open) and the half-open probe (one atomic slot, success, failure, stale and late results).

The state machine itself is covered by ``test_breaker_transitions.py`` and
``test_breaker_probes.py``; here: what the services add on top.
"""

from __future__ import annotations

import asyncio

import pytest

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import Breaker, BreakerState, Permit
from resilience.services.breakers import (
    breaker_acquire,
    breaker_list,
    breaker_record_failure,
    breaker_record_success,
)
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, fail, stored
from tests.resilience.conftest import FakeClock, WriteLog


async def half_open(store: StateStore, clock: FakeClock) -> Permit:
    """Open the breaker, let it cool down, and take the probe permit."""
    await fail(store, APIKEY.failure_threshold)
    clock.advance(APIKEY.reset_timeout)
    breaker, permit = await breaker_acquire(store=store, name=PROVIDER, policy=APIKEY)
    assert breaker.state == BreakerState.HALF_OPEN
    assert permit is not None and permit.probe
    return permit


# --- acquire and counting ---------------------------------------------------------------------


async def test_acquire_without_a_record_permits_and_stores_nothing(
    state_store: StateStore, write_log: WriteLog
) -> None:
    breaker, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)

    assert breaker == Breaker()
    assert permit == Permit(probe=False, generation=0)
    assert await breaker_list(store=state_store) == {}
    assert write_log.saved == []


@pytest.mark.parametrize(
    ("failures", "state"),
    [
        (1, BreakerState.CLOSED),
        (6, BreakerState.CLOSED),
        (7, BreakerState.DEGRADED),
        (11, BreakerState.DEGRADED),
        (12, BreakerState.OPEN),
    ],
)
async def test_failures_against_the_api_key_thresholds(
    state_store: StateStore, write_log: WriteLog, failures: int, state: BreakerState
) -> None:
    await fail(state_store, failures)

    breaker = await stored(state_store)
    _, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    assert (breaker.state, breaker.failure_count) == (state, failures)
    assert (permit is not None) == (state != BreakerState.OPEN)
    assert write_log.saved[-1] == (PROVIDER, breaker, APIKEY)


async def test_same_connection_is_deduplicated_for_five_seconds(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    async def record(connection_id: int) -> Breaker | None:
        return await breaker_record_failure(
            store=state_store, name=PROVIDER, policy=APIKEY, connection_id=connection_id
        )

    assert (await record(1) or Breaker()).failure_count == 1
    fake_clock.advance(4)
    assert await record(1) is None
    assert (await record(2) or Breaker()).failure_count == 2  # another connection counts
    fake_clock.advance(1)
    assert (await record(1) or Breaker()).failure_count == 3
    assert (await stored(state_store)).failure_count == 3


async def test_network_failures_are_deduplicated_per_provider_for_ten_seconds(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    async def record(connection_id: int, network: bool = True, name: str = PROVIDER) -> bool:
        counted = await breaker_record_failure(
            store=state_store,
            name=name,
            policy=APIKEY,
            connection_id=connection_id,
            network=network,
        )
        return counted is not None

    assert await record(1)
    fake_clock.advance(5)
    assert not await record(2)  # another connection, same provider: dropped
    assert await record(3, name="anthropic")  # the window is per provider
    assert await record(4, network=False)  # only network failures share the window
    fake_clock.advance(5)
    assert await record(5)
    assert (await stored(state_store)).failure_count == 3


async def test_failure_while_open_does_not_push_the_timer(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    fake_clock.advance(10)
    before = await stored(state_store)
    writes = len(write_log.saved)

    await fail(state_store)

    after = await stored(state_store)
    assert after == before
    assert after.retry_after(APIKEY, fake_clock()) == 20.0
    assert len(write_log.saved) == writes


async def test_a_read_after_the_reset_timeout_half_opens(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    fake_clock.advance(APIKEY.reset_timeout - 1)
    breaker, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    assert (breaker.state, permit) == (BreakerState.OPEN, None)
    assert breaker.retry_after(APIKEY, fake_clock()) == 1.0

    fake_clock.advance(1)

    assert (await stored(state_store)).refreshed(APIKEY, fake_clock()).state == "half_open"
    breaker, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    assert breaker.state == BreakerState.HALF_OPEN
    assert permit is not None and permit.probe
    assert (await stored(state_store)).probe_started_at == fake_clock()


# --- half open --------------------------------------------------------------------------------


async def test_concurrent_acquires_hand_out_one_probe(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    fake_clock.advance(APIKEY.reset_timeout)

    results = await asyncio.gather(
        *(breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY) for _ in range(20))
    )

    permits = [permit for _, permit in results if permit is not None]
    assert len(permits) == 1 and permits[0].probe
    assert (await stored(state_store)).half_open_allowed == 0


async def test_probe_success_closes(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    permit = await half_open(state_store, fake_clock)

    breaker = await breaker_record_success(
        store=state_store, name=PROVIDER, policy=APIKEY, connection_id=1, permit=permit
    )

    assert breaker.state == BreakerState.CLOSED
    assert (breaker.failure_count, breaker.open_cycle_count) == (0, 0)
    assert breaker.transitions[-1].reason == "probe-success"
    assert await stored(state_store) == breaker


async def test_probe_failure_reopens_with_one_more_cycle(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    permit = await half_open(state_store, fake_clock)

    breaker = await breaker_record_failure(
        store=state_store, name=PROVIDER, policy=APIKEY, connection_id=1, permit=permit
    )

    assert breaker is not None and breaker.state == BreakerState.OPEN
    assert breaker.open_cycle_count == 1
    assert breaker.retry_after(APIKEY, fake_clock()) == APIKEY.reset_timeout
    assert await stored(state_store) == breaker


@pytest.mark.parametrize("permit", [None, Permit(probe=False, generation=0)])
async def test_success_without_the_probe_permit_stays_half_open(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog, permit: Permit | None
) -> None:
    await half_open(state_store, fake_clock)

    breaker = await breaker_record_success(
        store=state_store, name=PROVIDER, policy=APIKEY, permit=permit
    )

    assert breaker.state == BreakerState.HALF_OPEN
    assert (await stored(state_store)).state == BreakerState.HALF_OPEN


async def test_a_stale_probe_result_is_ignored_after_re_arm(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    stale = await half_open(state_store, fake_clock)
    fake_clock.advance(APIKEY.reset_timeout)  # the probe never answered: re-armed
    _, fresh = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    assert fresh is not None and fresh.probe and fresh.generation > stale.generation

    late_success = await breaker_record_success(
        store=state_store, name=PROVIDER, policy=APIKEY, permit=stale
    )
    late_failure = await breaker_record_failure(
        store=state_store, name=PROVIDER, policy=APIKEY, connection_id=1, permit=stale
    )

    assert late_success.state == BreakerState.HALF_OPEN
    assert late_failure is not None and late_failure.state == BreakerState.HALF_OPEN
    assert late_failure.failure_count == APIKEY.failure_threshold
    closed = await breaker_record_success(
        store=state_store, name=PROVIDER, policy=APIKEY, permit=fresh
    )
    assert closed.state == BreakerState.CLOSED


async def test_a_late_success_while_open_changes_nothing(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)  # a request sent before it opened ...
    fake_clock.advance(1)
    before = await stored(state_store)

    await breaker_record_success(store=state_store, name=PROVIDER, policy=APIKEY)  # ... succeeds

    assert await stored(state_store) == before
