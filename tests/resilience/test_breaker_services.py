"""The breaker services on every store backend with a fake clock, and the restart path.

The state machine itself is covered by ``test_breaker.py``; here: what the services add on top
(no record for a healthy provider, de-duplication windows, atomic probe slots, dropping
failures while open, reset, sweep and the registry cap) and the write-through and restore.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from channels.db import database_sync_to_async

from resilience.domain.breaker import Breaker, BreakerPolicy, BreakerState, Permit
from resilience.domain.profiles import PROFILES, ProfileName
from resilience.models import CircuitBreaker
from resilience.persistence import persisted_breakers, persistence_flush, policy_from_dict
from resilience.services import breakers as services
from resilience.services.breakers import (
    breaker_acquire,
    breaker_get,
    breaker_key,
    breaker_list,
    breaker_record_failure,
    breaker_record_success,
    breaker_reset,
    breaker_reset_all,
    breaker_restore,
    breaker_sweep,
)
from resilience.services.housekeeping import resilience_ready
from resilience.store import MemoryStore, StateStore
from tests.resilience.conftest import FakeClock, WriteLog

APIKEY = BreakerPolicy.from_profile(PROFILES[ProfileName.APIKEY])  # DEGRADED 7, OPEN 12, 30 s
PROVIDER = "openai"
HALF_AN_HOUR = 30 * 60

_connections = itertools.count(1)


async def fail(store: StateStore, times: int = 1, name: str = PROVIDER) -> Breaker | None:
    """``times`` failures, each from a connection of its own (no de-duplication applies)."""
    result = None
    for _ in range(times):
        result = await breaker_record_failure(
            store=store, name=name, policy=APIKEY, connection_id=next(_connections)
        )
    return result


async def stored(store: StateStore, name: str = PROVIDER) -> Breaker:
    return await breaker_get(store=store, name=name)


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
            store=state_store, name=name, policy=APIKEY, connection_id=connection_id,
            network=network,
        )  # fmt: skip
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


# --- reset, sweep, registry cap ---------------------------------------------------------------


async def test_reset_closes_and_keeps_the_record(
    state_store: StateStore, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)

    breaker = await breaker_reset(store=state_store, name=PROVIDER)

    assert breaker.state == BreakerState.CLOSED
    assert (breaker.failure_count, breaker.last_failure_at) == (0, None)
    assert breaker.transitions[-1].reason == "manual-reset"
    assert await breaker_list(store=state_store) == {PROVIDER: breaker}
    _, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    assert permit == Permit(probe=False, generation=breaker.probe_generation)


async def test_reset_all_resets_every_breaker(state_store: StateStore, write_log: WriteLog) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    await fail(state_store, 7, name="anthropic")

    assert await breaker_reset_all(store=state_store) == 2

    breakers = await breaker_list(store=state_store)
    assert {name: b.state for name, b in breakers.items()} == {
        PROVIDER: BreakerState.CLOSED,
        "anthropic": BreakerState.CLOSED,
    }
    assert write_log.deleted == []


async def test_reset_all_forget_deletes_records_and_rows(
    state_store: StateStore, write_log: WriteLog
) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    await fail(state_store, 7, name="anthropic")

    assert await breaker_reset_all(store=state_store, forget=True) == 2

    assert await breaker_list(store=state_store) == {}
    assert sorted(write_log.deleted) == ["anthropic", PROVIDER]


async def recovered(store: StateStore, name: str) -> None:
    """A breaker back to CLOSED with no failures, its last failure remembered as now."""
    await fail(store, name=name)
    await breaker_record_success(store=store, name=name, policy=APIKEY)


async def test_sweep_drops_only_idle_pristine_breakers(
    state_store: StateStore, fake_clock: FakeClock, write_log: WriteLog
) -> None:
    await recovered(state_store, "idle")
    await fail(state_store, APIKEY.failure_threshold, name="open")
    await fail(state_store, 7, name="degraded")
    await fail(state_store, name="counting")
    fake_clock.advance(HALF_AN_HOUR - 60)
    await recovered(state_store, "recent")
    await fail(state_store, name="reset")
    await breaker_reset(store=state_store, name="reset")
    assert await breaker_sweep(store=state_store) == ["reset"]  # no last failure at all

    fake_clock.advance(60)

    assert await breaker_sweep(store=state_store) == ["idle"]
    remaining = await breaker_list(store=state_store)
    assert sorted(remaining) == ["counting", "degraded", "open", "recent"]
    assert write_log.deleted == ["reset", "idle"]


@pytest.mark.parametrize(
    ("cap", "evicted"),
    [
        (6, []),
        (5, ["p2"]),
        (4, ["p2", "p0"]),
        (2, ["p2", "p0", "p3", "p1"]),
        (1, ["p2", "p0", "p3", "p1"]),
    ],
)
async def test_registry_cap_evicts_pristine_breakers_oldest_first(
    state_store: StateStore,
    fake_clock: FakeClock,
    write_log: WriteLog,
    monkeypatch: pytest.MonkeyPatch,
    cap: int,
    evicted: list[str],
) -> None:
    await fail(state_store, APIKEY.failure_threshold, name="open")
    await fail(state_store, 7, name="degraded")
    for name in ("p2", "p0", "p3", "p1"):  # oldest last failure first
        fake_clock.advance(60)
        await recovered(state_store, name)
    monkeypatch.setattr(services, "REGISTRY_CAP", cap)

    assert await breaker_sweep(store=state_store) == evicted

    remaining = set(await breaker_list(store=state_store))
    assert remaining == {"open", "degraded", "p0", "p1", "p2", "p3"} - set(evicted)
    assert write_log.deleted == evicted


# --- write-through and restart ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_an_open_breaker_survives_a_restart(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    await fail(store, APIKEY.failure_threshold)
    fake_clock.advance(10)
    await persistence_flush()
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
    await persistence_flush()
    rows = await database_sync_to_async(persisted_breakers)()  # OPEN
    await breaker_reset(store=store, name=PROVIDER)

    assert await breaker_restore(store=store, rows=rows) == 0
    assert (await stored(store)).state == BreakerState.CLOSED
    await persistence_flush()


@pytest.mark.django_db(transaction=True)
async def test_resilience_ready_restores_once(fake_clock: FakeClock) -> None:
    await fail(MemoryStore(clock=fake_clock), APIKEY.failure_threshold)
    await persistence_flush()
    restarted = MemoryStore(clock=fake_clock)

    await asyncio.gather(*(resilience_ready(restarted) for _ in range(5)))
    assert (await stored(restarted)).state == BreakerState.OPEN
    await restarted.delete(breaker_key(PROVIDER))
    await resilience_ready(restarted)

    assert await breaker_list(store=restarted) == {}
