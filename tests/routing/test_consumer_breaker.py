"""The provider breaker, end to end through the chat consumer: short-circuit, probes, combos.

An ``httpx.MockTransport`` plays the upstream and a ``MemoryStore`` on a fake clock holds the
resilience state, so reset timeouts and de-duplication windows pass without sleeping.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from channels.db import database_sync_to_async

from omniroute.core import tasks
from resilience.domain.breaker.machine import Breaker, BreakerPolicy, BreakerState
from resilience.models import CircuitBreaker
from resilience.services import breakers as breaker_services
from routing.models import Provider
from tests.routing.breaker_support import (
    A_BACKUP_SECRET,
    A_MODEL,
    A_SECRET,
    B_SECRET,
    MODEL,
    RESET_SECONDS,
    THRESHOLD,
    add_combo,
    trip,
)
from tests.routing.harness import (
    COMPLETION,
    OK,
    RATE_LIMITED,
    RECEIVE_TIMEOUT_SECONDS,
    UNAVAILABLE,
    Gateway,
    raising,
    read_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)

# --- 1. open breaker short-circuits ---------------------------------------------------------


async def test_an_open_breaker_answers_503_without_calling_upstream(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    gateway.fake.behaviours[A_SECRET] = UNAVAILABLE
    await trip(gateway)
    assert (await gateway.breaker("acme")).state is BreakerState.OPEN

    reply = await gateway.call(A_MODEL)

    assert reply.status == 503
    assert reply.json() == {
        "error": {
            "message": "Provider acme circuit breaker is open",
            "type": "server_error",
            "code": "provider_circuit_open",
            "provider": "acme",
            "retry_after": RESET_SECONDS,
        }
    }
    assert reply.headers["retry-after"] == str(RESET_SECONDS)
    assert reply.headers["x-omniroute-provider-breaker"] == "open"
    assert gateway.fake.calls == [A_SECRET] * (THRESHOLD + 1)
    # and the wait counts down in whole seconds, rounded up
    gateway.clock.advance(10.5)
    later = await gateway.call(A_MODEL)
    assert (later.json()["error"]["retry_after"], later.headers["retry-after"]) == (20, "20")


async def test_an_opening_is_written_before_its_answer_returns(
    gateway: Gateway, acme_primary: int, thresholds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Durable state: a kill right after the answer must not lose an open breaker. The spy's
    # write of the opening takes many loop turns: only an awaited write ends before the answer.
    written: list[str] = []
    persist = breaker_services.persist_breaker

    async def slow(state: str) -> None:
        for _ in range(200):
            await asyncio.sleep(0)
        written.append(state)

    def spy(name: str, breaker: Breaker, policy: BreakerPolicy | None) -> asyncio.Task[None]:
        persist(name, breaker, policy)
        return asyncio.ensure_future(slow(str(breaker.state)))

    monkeypatch.setattr(breaker_services, "persist_breaker", spy)
    gateway.fake.behaviours[A_SECRET] = UNAVAILABLE

    await trip(gateway)

    assert "open" in written
    await tasks.flush()
    row = await CircuitBreaker.objects.aget(name="acme")
    assert (row.state, row.failure_count) == ("open", THRESHOLD)


# --- 3 and 4. half-open probes --------------------------------------------------------------


async def test_after_the_reset_timeout_exactly_one_probe_reaches_upstream(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    # given: an open breaker whose reset timeout has elapsed, and an upstream that holds
    gateway.fake.behaviours[A_SECRET] = UNAVAILABLE
    await trip(gateway)
    gateway.clock.advance(RESET_SECONDS)
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        entered.set()
        await release.wait()
        return await OK(request)

    gateway.fake.behaviours[A_SECRET] = held
    gateway.fake.requests.clear()
    # when: a second request arrives while the probe is in flight
    probe = await gateway.start(A_MODEL)
    await asyncio.wait_for(entered.wait(), RECEIVE_TIMEOUT_SECONDS)
    second = await gateway.call(A_MODEL)
    release.set()
    first = await read_reply(probe)
    # then
    assert (second.status, second.json()["error"]["code"]) == (503, "provider_circuit_open")
    assert second.headers["x-omniroute-provider-breaker"] == "open"
    assert (first.status, first.json()) == (200, COMPLETION)
    assert gateway.fake.calls == [A_SECRET]
    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.failure_count) == (BreakerState.CLOSED, 0)


async def test_a_failed_probe_reopens_the_breaker(
    gateway: Gateway, acme_primary: int, thresholds: None
) -> None:
    gateway.fake.behaviours[A_SECRET] = UNAVAILABLE
    await trip(gateway)
    gateway.clock.advance(RESET_SECONDS)

    probe = await gateway.call(A_MODEL)
    after = await gateway.call(A_MODEL)

    assert probe.status == 503 and "x-omniroute-provider-breaker" not in probe.headers
    breaker = await gateway.breaker("acme")
    assert (breaker.state, breaker.open_cycle_count) == (BreakerState.OPEN, 1)
    assert after.json()["error"]["code"] == "provider_circuit_open"
    assert after.headers["retry-after"] == str(RESET_SECONDS)
    assert gateway.fake.calls == [A_SECRET] * (THRESHOLD + 2)


# --- 5 and 6. combos ------------------------------------------------------------------------


async def test_a_combo_skips_an_open_provider_then_cools_down_when_all_are_open(
    gateway: Gateway,
    acme: Provider,
    acme_primary: int,
    bravo: Provider,
    bravo_only: int,
    thresholds: None,
) -> None:
    # given: a combo over acme then bravo, and acme's breaker open
    await database_sync_to_async(add_combo)("duo", (acme, None), (bravo, None))
    fake = gateway.fake
    fake.behaviours.update({A_SECRET: UNAVAILABLE, B_SECRET: OK})
    await trip(gateway)
    # when / then: bravo serves and acme is not asked
    served = await gateway.call("duo")
    assert (served.status, served.decision()["provider"]) == (200, "bravo")
    assert served.decision()["excluded"] == f"acme/{MODEL}@{acme_primary}:circuit_open"
    assert fake.calls == [A_SECRET] * (THRESHOLD + 1) + [B_SECRET]
    # when: bravo's breaker opens too
    fake.behaviours[B_SECRET] = UNAVAILABLE
    await trip(gateway, "bravo")
    calls = len(fake.calls)
    cooling = await gateway.call("duo")
    # then
    assert cooling.status == 503
    assert cooling.json()["error"]["code"] == "all_targets_cooling_down"
    assert cooling.headers["retry-after"] == "12"  # acme's, opened 3 x 6 s ago
    assert "x-omniroute-provider-breaker" not in cooling.headers
    assert len(fake.calls) == calls


@pytest.mark.parametrize(("next_provider", "counted"), [("acme", 0), ("bravo", 1)])
async def test_a_combo_failure_counts_only_when_the_next_step_leaves_the_provider(
    gateway: Gateway,
    acme: Provider,
    acme_primary: int,
    acme_backup: int,
    bravo: Provider,
    bravo_only: int,
    thresholds: None,
    next_provider: str,
    counted: int,
) -> None:
    # The second step answers 429 (never counted) rather than 200, whose success would take
    # one failure off acme's count and hide a wrongly counted one. The first step's failure is
    # network-level, so it counts on its own.
    same = next_provider == "acme"
    second, second_secret = (
        ((acme, acme_backup), A_BACKUP_SECRET) if same else ((bravo, bravo_only), B_SECRET)
    )
    await database_sync_to_async(add_combo)("pair", (acme, acme_primary), second)
    gateway.fake.behaviours.update(
        {
            A_SECRET: raising(httpx.ConnectError),
            A_BACKUP_SECRET: RATE_LIMITED,
            B_SECRET: RATE_LIMITED,
        }
    )

    reply = await gateway.call("pair")

    assert reply.status == 429
    assert gateway.fake.calls == [A_SECRET, second_secret]
    assert (await gateway.breaker("acme")).failure_count == counted
