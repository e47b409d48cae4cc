"""What counts against the provider breaker, through the chat consumer: not
client errors or rate limits, not one pair's 5xx, but network failures,
5xx across pairs and a failure rate among successes.
"""

from __future__ import annotations

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.domain.breaker.machine import BreakerState
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_state_reset
from routing.services.connections import connection_state_write
from tests.routing.breaker_support import (
    A_MODEL,
    A_SECRET,
    MODEL,
    OTHER_MODEL,
    PAST_NETWORK_DEDUP_SECONDS,
    THRESHOLD,
    trip,
)
from tests.routing.harness import (
    OK,
    PAST_CONNECTION_DEDUP_SECONDS,
    RATE_LIMITED,
    UNAVAILABLE,
    Behaviour,
    Gateway,
    error,
    raising,
)

pytestmark = pytest.mark.django_db(transaction=True)

# --- 2. what counts -------------------------------------------------------------------------


IGNORED = {
    "429": RATE_LIMITED,
    "400": error(400, "bad temperature", "invalid_request"),
    "401": error(401, "bad key", "invalid_api_key"),
    "403": error(403, "forbidden", "forbidden"),
    "404": error(404, "no such model", "model_not_found"),
    "529": error(529, "busy", "busy"),
    "503-overloaded": error(503, "The model is Overloaded, try later"),
    "500-context": error(500, "prompt too long", "context_length_exceeded"),
}


@pytest.mark.parametrize("behaviour", IGNORED.values(), ids=IGNORED.keys())
async def test_client_errors_rate_limits_and_request_scoped_failures_never_count(
    gateway: Gateway, acme_primary: int, thresholds: None, behaviour: Behaviour
) -> None:
    gateway.fake.behaviours[A_SECRET] = behaviour

    for _ in range(THRESHOLD + 2):
        gateway.clock.advance(PAST_NETWORK_DEDUP_SECONDS)
        # A 401 makes the connection terminal (expired): forget that, in the store and in its
        # row (a snapshot rebuilt meanwhile reads the row), so each request reaches the
        # upstream and only the breaker is under test.
        await connection_state_reset(store=gateway.store, connection_id=acme_primary)
        await database_sync_to_async(connection_state_write)(acme_primary, ConnectionState())
        assert (await gateway.call(A_MODEL)).status >= 400

    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.CLOSED, 0)
    assert len(gateway.fake.calls) == THRESHOLD + 2


PINNED = {
    **{str(status): error(status, "upstream trouble") for status in (408, 500, 502, 503, 504)},
    "read-timeout": raising(httpx.ReadTimeout),
}


@pytest.mark.parametrize("behaviour", PINNED.values(), ids=PINNED.keys())
async def test_server_errors_and_timeouts_of_one_pair_never_open_the_breaker(
    gateway: Gateway, acme_primary: int, thresholds: None, behaviour: Behaviour
) -> None:
    # One failing (connection, model) pair says nothing about the provider.
    gateway.fake.behaviours[A_SECRET] = behaviour

    await gateway.fail(A_MODEL, THRESHOLD * 3)

    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.CLOSED, 0)
    reply = await gateway.call(A_MODEL)
    assert reply.json()["error"]["code"] != "provider_circuit_open"
    assert len(gateway.fake.calls) == THRESHOLD * 3 + 1


@pytest.mark.parametrize("behaviour", PINNED.values(), ids=PINNED.keys())
async def test_server_errors_and_timeouts_of_two_pairs_open_the_breaker(
    gateway: Gateway, acme_primary: int, thresholds: None, behaviour: Behaviour
) -> None:
    gateway.fake.behaviours[A_SECRET] = behaviour

    await trip(gateway)

    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.OPEN, THRESHOLD)
    assert (await gateway.call(A_MODEL)).json()["error"]["code"] == "provider_circuit_open"
    assert len(gateway.fake.calls) == THRESHOLD + 1


async def test_network_failures_open_the_breaker_on_their_own(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    gateway.fake.behaviours[A_SECRET] = raising(httpx.ConnectError)

    await gateway.fail(A_MODEL, THRESHOLD, gap=PAST_NETWORK_DEDUP_SECONDS)

    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.OPEN, THRESHOLD)
    assert (await gateway.call(A_MODEL)).json()["error"]["code"] == "provider_circuit_open"
    assert len(gateway.fake.calls) == THRESHOLD


async def test_a_repeat_inside_the_connection_dedup_window_is_not_counted(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    gateway.fake.behaviours[A_SECRET] = UNAVAILABLE

    await trip(gateway, gap=1.0)  # m1 pinned, m2 counted, m1 and m2 again inside 5 s

    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.CLOSED, 1)


async def test_a_failure_rate_among_successes_opens_the_breaker(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    # Within the window, at least minimumCalls (10) calls, 50 % of them failed
    # (two pairs, so not pinned), with successes in between: the consecutive count never
    # reaches the threshold (most failures fall in the 5 s de-duplication window too).
    failures = 0
    for turn in range(20):
        gateway.clock.advance(PAST_CONNECTION_DEDUP_SECONDS / 2)
        failing = turn % 3 != 2
        gateway.fake.behaviours[A_SECRET] = UNAVAILABLE if failing else OK
        await gateway.call(f"acme/{MODEL if failures % 2 == 0 else OTHER_MODEL}")
        failures += failing
        if (await gateway.breaker("acme")).state is BreakerState.OPEN:
            break

    breaker = await gateway.breaker("acme")
    assert breaker.state is BreakerState.OPEN
    assert breaker.transitions[-1].reason == "failure-rate"
    assert breaker.failure_count < THRESHOLD
    assert 10 <= len(gateway.fake.calls) < 20
