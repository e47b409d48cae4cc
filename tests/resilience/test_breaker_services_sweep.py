"""The breaker services that drop or reset records, on every store backend with a fake clock:
manual reset (one, all, forget), the idle sweep and the registry cap.
"""

from __future__ import annotations

import pytest

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import BreakerState, Permit
from resilience.services import breakers as services
from resilience.services.breakers import (
    breaker_acquire,
    breaker_list,
    breaker_record_success,
    breaker_reset,
    breaker_reset_all,
    breaker_sweep,
)
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, fail
from tests.resilience.conftest import FakeClock, WriteLog

HALF_AN_HOUR = 30 * 60


async def recovered(store: StateStore, name: str) -> None:
    """A breaker back to CLOSED with no failures, its last failure remembered as now."""
    await fail(store, name=name)
    await breaker_record_success(store=store, name=name, policy=APIKEY)


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
