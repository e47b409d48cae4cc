"""Connection cooldowns and terminal states, end to end through the chat consumer.

An ``httpx.MockTransport`` plays two keys of one API-key provider and a ``MemoryStore`` on a
fake clock holds the resilience state, so cooldowns run out without sleeping
(hinted and scaled cooldowns, the anti-thundering-herd guard, terminal states,
``disable_cooling``, success clearing once, the operator reset).

Only account-wide evidence cools a whole connection: here the provider
counts quota per account (``per_model_quota`` off), so its 429s are charged to the connection.
5xx are charged to the (connection, model) pair and never cool a connection (see
``test_consumer_availability``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async

from omniroute.core import tasks
from resilience.domain.breaker.machine import BreakerState
from resilience.domain.connection_state import ConnectionState
from resilience.services import connections as connection_services
from resilience.services import resilience_settings_update
from resilience.services.breakers import breaker_get
from routing import services as routing_services
from routing.models import Provider, ProviderConnection
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    UNAVAILABLE,
    Gateway,
    add_connection,
    add_provider,
    error,
    gathering,
)

pytestmark = pytest.mark.django_db(transaction=True)

# A self-set timer (no upstream hint) starts at availability.transientCooldownBaseMs, 2 s, and
# doubles with each failed try up to availability.transientCooldownCapMs, 30 s;
# the backoff level stops rising at the cap.
SCALED = [(2, 1), (4, 2), (8, 3), (16, 4), (30, 4), (30, 4), (30, 4)]
# A 429 without a hint on an account-wide-quota provider: the connection cools, scaled.
SLOW_DOWN = error(429, "slow down")

# The operator's reset of a terminal connection (connection_clear_error where it is missing).
operator_reset: Callable[..., Any] = getattr(
    routing_services, "connection_reset_terminal", routing_services.connection_clear_error
)


# --- data (``gateway``, ``acme`` and ``process_store`` come from conftest) ------------------


@pytest.fixture
def acme(db: None) -> Provider:
    """An API-key provider whose quota is per account: 429s are account-wide evidence."""
    return add_provider("acme", per_model_quota=False)


@pytest.fixture
def patient_breaker(db: None) -> None:
    """A breaker that never opens here, so only the connection cooldowns are under test."""
    breaker = {"failureThreshold": 1000, "degradationThreshold": 999}
    resilience_settings_update(patch={"providerBreaker": {"apikey": breaker}})


# --- 1. an upstream hint cools one key, not the provider ------------------------------------


async def test_a_429_with_retry_after_cools_only_that_connection_for_the_hinted_seconds(
    gateway: Gateway, primary: int, backup: int
) -> None:
    fake = gateway.fake
    fake.behaviours.update(
        {PRIMARY: error(429, "slow down", headers={"retry-after": "7"}), BACKUP: OK}
    )
    # given: the primary refused with a hint, the backup served
    assert (await gateway.call()).connection == backup
    assert await gateway.cooling_for(primary) == 7
    # when / then: for 7 clock seconds every request goes straight to the backup
    for _ in range(13):
        gateway.clock.advance(0.5)
        assert (await gateway.call()).connection == backup
    assert fake.calls == [PRIMARY] + [BACKUP] * 14
    # when / then: at +7 s the primary is asked again
    gateway.clock.advance(0.5)
    fake.behaviours[PRIMARY] = OK
    assert (await gateway.call()).connection == primary
    breaker = await breaker_get(store=gateway.store, name="acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.CLOSED, 0)


# --- 2 and 3. scaled backoff, raised once per cooldown --------------------------------------


async def test_failures_without_a_hint_double_the_cooldown_from_the_base_up_to_the_cap(
    gateway: Gateway, primary: int, backup: int, patient_breaker: None
) -> None:
    fake = gateway.fake
    fake.behaviours.update({PRIMARY: SLOW_DOWN, BACKUP: OK})

    for cooldown, level in SCALED:
        calls = len(fake.calls)
        assert (await gateway.call()).connection == backup
        state = await gateway.state(primary)
        assert (state.remaining(gateway.clock.now), state.backoff_level) == (cooldown, level)
        gateway.clock.advance(cooldown - 0.5)
        assert (await gateway.call()).connection == backup
        assert fake.calls[calls:] == [PRIMARY, BACKUP, BACKUP]
        gateway.clock.advance(0.5)


async def test_fifty_concurrent_failures_raise_the_backoff_level_once(
    gateway: Gateway, primary: int, backup: int
) -> None:
    requests = 50
    gateway.fake.behaviours.update(
        {PRIMARY: gathering(requests, error(429, "slow down")), BACKUP: OK}
    )

    replies = await asyncio.gather(*(gateway.call() for _ in range(requests)))

    assert {reply.connection for reply in replies} == {backup}
    assert gateway.fake.calls.count(PRIMARY) == requests
    state = await gateway.state(primary)
    assert (state.backoff_level, state.remaining(gateway.clock.now)) == (1, 2)


# --- 4. terminal states ---------------------------------------------------------------------


TERMINAL = {
    "expired": (401, "Incorrect API key provided"),
    "credits_exhausted": (402, "Payment required"),
    "banned": (403, "Your account has been deactivated"),
}


@pytest.mark.parametrize(("terminal", "answer"), TERMINAL.items(), ids=TERMINAL.keys())
async def test_a_terminal_connection_is_never_asked_again(
    gateway: Gateway, primary: int, backup: int, terminal: str, answer: tuple[int, str]
) -> None:
    # given: the primary's answer made it terminal; the classifier says fall back, so the
    # backup serves that same request
    fake = gateway.fake
    fake.behaviours.update({PRIMARY: error(*answer), BACKUP: OK})
    first = await gateway.call()
    assert (first.status, first.connection) == (200, backup)
    assert (await gateway.state(primary)).test_status == terminal
    # when: it would now only fail transiently, across hours of requests
    fake.behaviours[PRIMARY] = UNAVAILABLE
    for _ in range(5):
        gateway.clock.advance(3600)
        assert (await gateway.call()).connection == backup
    # then: it was never asked, and stays terminal in the store and in its row
    assert fake.calls == [PRIMARY] + [BACKUP] * 6
    assert (await gateway.state(primary)).test_status == terminal
    await tasks.flush()
    row = await ProviderConnection.objects.aget(pk=primary)
    assert (row.test_status, row.rate_limited_until) == (terminal, None)


async def test_a_terminal_state_is_written_before_its_answer_returns(
    gateway: Gateway, primary: int, backup: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Durable before the answer: the spy's write takes many loop turns; only an awaited one wins.
    written: list[str] = []
    persist = connection_services.persist_connection_state

    async def slow(status: str) -> None:
        for _ in range(200):
            await asyncio.sleep(0)
        written.append(status)

    def spy(connection_id: int, state: ConnectionState) -> asyncio.Task[None]:
        persist(connection_id, state)
        return asyncio.ensure_future(slow(state.test_status))

    monkeypatch.setattr(connection_services, "persist_connection_state", spy)
    gateway.fake.behaviours.update({PRIMARY: error(401, "Incorrect API key provided"), BACKUP: OK})

    assert (await gateway.call()).connection == backup

    assert written == ["expired"]
    await tasks.flush()
    row = await ProviderConnection.objects.aget(pk=primary)
    assert row.test_status == "expired"


async def test_the_operator_reset_brings_a_terminal_connection_back(
    gateway: Gateway, primary: int, backup: int, process_store: None
) -> None:
    fake = gateway.fake
    fake.behaviours.update({PRIMARY: error(401, "Incorrect API key provided"), BACKUP: OK})
    await gateway.call()
    assert (await gateway.state(primary)).test_status == "expired"
    await tasks.flush()

    row = await ProviderConnection.objects.aget(pk=primary)
    await database_sync_to_async(operator_reset)(connection=row)
    fake.behaviours[PRIMARY] = OK
    reply = await gateway.call()

    assert reply.connection == primary
    assert (await gateway.state(primary)).is_clean


# --- 5 and 6. clearing once; disable_cooling ------------------------------------------------


async def test_a_success_clears_the_error_fields_once(
    gateway: Gateway, primary: int, backup: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[tuple[int, ConnectionState]] = []
    persist = connection_services.persist_connection_state

    def spy(connection_id: int, state: ConnectionState) -> None:
        written.append((connection_id, state))
        persist(connection_id, state)

    monkeypatch.setattr(connection_services, "persist_connection_state", spy)
    fake = gateway.fake
    fake.behaviours.update({PRIMARY: SLOW_DOWN, BACKUP: OK})
    # given: a failure, and its cooldown over
    await gateway.call()
    failed = await gateway.state(primary)
    gateway.clock.advance(3)
    fake.behaviours[PRIMARY] = OK
    # when: two successes
    assert (await gateway.call()).connection == primary
    assert (await gateway.call()).connection == primary
    # then: one clean write, and nothing for the second success
    assert written == [(primary, failed), (primary, ConnectionState())]
    assert (failed.error_code, failed.backoff_level) == ("429", 1)
    await tasks.flush()
    row = await ProviderConnection.objects.aget(pk=primary)
    cleared = (row.test_status, row.rate_limited_until, row.backoff_level, row.last_error)
    assert cleared == ("active", None, 0, "")


async def test_disable_cooling_records_the_error_but_never_cools(
    gateway: Gateway, acme: Provider, patient_breaker: None
) -> None:
    only = await database_sync_to_async(add_connection)(
        acme, "uncooled", PRIMARY, priority=10, disable_cooling=True
    )
    fake = gateway.fake
    failures = [SLOW_DOWN, error(429, "slow down", headers={"retry-after": "30"}), SLOW_DOWN]

    for number, behaviour in enumerate(failures, start=1):
        fake.behaviours[PRIMARY] = behaviour
        assert (await gateway.call()).status >= 429
        state = await gateway.state(only)
        assert (state.test_status, state.rate_limited_until) == ("active", None)
        assert state.last_error and state.error_code == "429"
        assert len(fake.calls) == number  # asked every time, no clock advance needed
