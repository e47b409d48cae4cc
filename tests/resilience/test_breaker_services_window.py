"""The breaker's failure-rate window under concurrency: calls that began
while the provider had no breaker record are no calls of a window another failure opened
meanwhile. Their successes are never recorded (the hot path skips a fresh permit), so counting
their failures alone made a burst of concurrent calls look like a failure rate far above the
real one, and opened the breaker of a provider failing 15 % of its calls (found by
``make chaos``).
"""

from __future__ import annotations

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import BreakerState
from resilience.services.breakers import (
    FRESH_PERMIT,
    breaker_acquire,
    breaker_record_failure,
    breaker_record_success,
)
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, stored
from tests.resilience.conftest import WriteLog

IN_FLIGHT = 12  # calls begun together while the provider had no record
FAILED = 5  # of which fail at the network level; the others succeed (never recorded)
LATER = 5  # calls begun after the window opened and succeeded; then one more fails


async def test_calls_begun_before_the_window_do_not_count_in_its_failure_rate(
    state_store: StateStore, write_log: WriteLog
) -> None:
    permits = [
        (await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY))[1]
        for _ in range(IN_FLIGHT)
    ]
    assert all(permit is FRESH_PERMIT for permit in permits)
    for permit in permits[:FAILED]:
        await breaker_record_failure(
            store=state_store,
            name=PROVIDER,
            policy=APIKEY,
            connection_id=1,
            network=True,
            permit=permit,
        )
    for _ in range(LATER):
        _, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
        assert permit is not FRESH_PERMIT
        await breaker_record_success(
            store=state_store, name=PROVIDER, policy=APIKEY, connection_id=1, permit=permit
        )
    _, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    await breaker_record_failure(
        store=state_store,
        name=PROVIDER,
        policy=APIKEY,
        connection_id=2,
        network=True,
        permit=permit,
    )

    breaker = await stored(state_store)
    assert breaker.state is not BreakerState.OPEN  # 1 of 6 calls failed, not 6 of 11
    # The failure that opened the window only opened it; the other early ones do not count;
    # the later calls do.
    assert (breaker.window.calls, breaker.window.failures) == (LATER + 1, 1)


async def test_a_failure_rate_among_calls_of_the_window_still_opens_it(
    state_store: StateStore, write_log: WriteLog
) -> None:
    _, first = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
    await breaker_record_failure(
        store=state_store,
        name=PROVIDER,
        policy=APIKEY,
        connection_id=1,
        network=True,
        permit=first,
    )
    # The opening failure only opens the window; a failure is judged when it is recorded, so
    # the calls end with one: 6 of 11 failed.
    for turn in range(APIKEY.minimum_calls + 1):
        _, permit = await breaker_acquire(store=state_store, name=PROVIDER, policy=APIKEY)
        if permit is None:
            break
        if turn % 2:
            await breaker_record_success(
                store=state_store, name=PROVIDER, policy=APIKEY, connection_id=1, permit=permit
            )
        else:
            await breaker_record_failure(
                store=state_store,
                name=PROVIDER,
                policy=APIKEY,
                connection_id=1,
                network=True,
                permit=permit,
            )

    breaker = await stored(state_store)
    assert breaker.state is BreakerState.OPEN
    assert breaker.transitions[-1].reason == "failure-rate"
