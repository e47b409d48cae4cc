"""A probe that ends with no result gives its half-open slot back (a hedge that
lost): pure, then through the service."""

from __future__ import annotations

import pytest

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import Breaker, BreakerPolicy, BreakerState, Permit
from resilience.services.breakers import (
    breaker_acquire,
    breaker_get,
    breaker_record_failure,
    breaker_release,
)
from tests.resilience.breaker_support import T0, opened, probing
from tests.resilience.conftest import FakeClock

POLICY = BreakerPolicy(failure_threshold=3, reset_timeout=30.0)
LATER = T0 + 31


def test_a_released_probe_slot_can_be_taken_again_at_once() -> None:
    breaker, permit = probing(POLICY, opened(POLICY), LATER)
    assert breaker.acquire(POLICY, LATER)[1] is None  # the one slot is out

    released = breaker.released(permit)

    assert released.state is BreakerState.HALF_OPEN and released.half_open_allowed == 1
    assert probing(POLICY, released, LATER + 1)[1].probe


def test_a_stale_or_ordinary_permit_changes_nothing() -> None:
    breaker, permit = probing(POLICY, opened(POLICY), LATER)
    stale = Permit(probe=True, generation=permit.generation - 1)

    assert breaker.released(stale) == breaker
    assert breaker.released(Permit(probe=False, generation=permit.generation)) == breaker
    closed = Breaker()
    assert closed.released(permit) == closed


@pytest.mark.usefixtures("write_log")
async def test_the_service_gives_the_slot_back(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    for _ in range(POLICY.failure_threshold):
        await breaker_record_failure(store=state_store, name="acme", policy=POLICY)
    fake_clock.advance(POLICY.reset_timeout)
    _, permit = await breaker_acquire(store=state_store, name="acme", policy=POLICY)
    assert permit is not None and permit.probe
    assert (await breaker_acquire(store=state_store, name="acme", policy=POLICY))[1] is None

    await breaker_release(store=state_store, name="acme", permit=permit)

    assert (await breaker_get(store=state_store, name="acme")).half_open_allowed == 1
    assert (await breaker_acquire(store=state_store, name="acme", policy=POLICY))[1] is not None
