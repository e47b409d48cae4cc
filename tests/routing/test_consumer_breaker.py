"""The provider breaker and the window gate, end to end through the chat consumer.

An ``httpx.MockTransport`` plays the upstream and a ``MemoryStore`` on a fake clock holds the
resilience state, so reset timeouts and de-duplication windows pass without sleeping
(reference-part1 §2.6, §2.8 and §3).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from channels.db import database_sync_to_async

from resilience.domain.breaker import Breaker, BreakerPolicy, BreakerState
from resilience.models import CircuitBreaker
from resilience.persistence import persistence_flush
from resilience.services import breakers as breaker_services
from resilience.services import resilience_settings_update
from resilience.services.connections import connection_state_reset
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import (
    COMPLETION,
    OK,
    PAST_CONNECTION_DEDUP_SECONDS,
    RATE_LIMITED,
    RECEIVE_TIMEOUT_SECONDS,
    UNAVAILABLE,
    Behaviour,
    Gateway,
    add_connection,
    add_provider,
    error,
    raising,
    read_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 3
RESET_SECONDS = 30
DEGRADE_AT = 2
BREAKER = {"failureThreshold": THRESHOLD, "degradationThreshold": DEGRADE_AT}
BREAKER_SETTINGS = {
    "providerBreaker": {"apikey": {**BREAKER, "resetTimeoutMs": RESET_SECONDS * 1000}},
    # One upstream call per request: the retry of a lone transient failure is tested elsewhere.
    "attempts": {"retriesPerTarget": 0},
}
# Failures are de-duplicated for 5 s per (provider, connection) (``Gateway.fail`` waits
# PAST_CONNECTION_DEDUP_SECONDS between them), network ones 10 s per provider.
PAST_NETWORK_DEDUP_SECONDS = 11.0
MODEL = "m1"
OTHER_MODEL = "m2"
A_MODEL = f"acme/{MODEL}"
A_SECRET = "sk-acme-PRIMARY-0001"
A_BACKUP_SECRET = "sk-acme-BACKUP-0002"
B_SECRET = "sk-bravo-ONLY-0003"


# --- data -----------------------------------------------------------------------------------


def add_uncooled(provider: Provider, name: str, secret: str, priority: int) -> int:
    # disable_cooling: these tests watch the provider breaker alone, without the per-connection
    # cooldowns that would otherwise skip a connection that just failed (tested elsewhere).
    return add_connection(provider, name, secret, priority=priority, disable_cooling=True)


def add_combo(name: str, *steps: tuple[Provider, int | None]) -> None:
    """A priority combo over ``MODEL`` at each (provider, pinned connection or None)."""
    targets = [{"provider": p, "model": MODEL, "connection_id": c} for p, c in steps]
    combo_save(combo=Combo(), fields={"name": name}, targets=targets)


async def trip(
    gateway: Gateway, provider: str = "acme", gap: float = PAST_CONNECTION_DEDUP_SECONDS
) -> None:
    """Open ``provider``'s breaker with 5xx from two pairs (models m1 and m2 in turn).

    A 5xx is pinned to its (connection, model) pair until another pair of the provider fails
    within the window (decision 14): the first failure is not counted, each later one is, so
    THRESHOLD + 1 requests open the breaker.
    """
    for attempt in range(THRESHOLD + 1):
        if attempt:
            gateway.clock.advance(gap)
        model = MODEL if attempt % 2 == 0 else OTHER_MODEL
        assert (await gateway.call(f"{provider}/{model}")).status >= 400


@pytest.fixture
def acme_primary(acme: Provider) -> int:
    return add_uncooled(acme, "primary", A_SECRET, priority=10)


@pytest.fixture
def acme_backup(acme: Provider) -> int:
    return add_uncooled(acme, "backup", A_BACKUP_SECRET, priority=20)


@pytest.fixture
def bravo(db: None) -> Provider:
    return add_provider("bravo")


@pytest.fixture
def bravo_only(bravo: Provider) -> int:
    return add_uncooled(bravo, "only", B_SECRET, priority=10)


@pytest.fixture
def thresholds(db: None) -> None:
    """API-key providers open at 3 failures, degrade at 2, and stay open 30 s."""
    resilience_settings_update(patch=BREAKER_SETTINGS)


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
    # Decision 18: a kill right after the answer must not lose an open breaker. The spy's
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
    await persistence_flush()
    row = await CircuitBreaker.objects.aget(name="acme")
    assert (row.state, row.failure_count) == ("open", THRESHOLD)


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
        # A 401 makes the connection terminal (expired): forget that, so each request reaches
        # the upstream and only the breaker is under test.
        await connection_state_reset(store=gateway.store, connection_id=acme_primary)
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
    # Decision 14: one failing (connection, model) pair says nothing about the provider.
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
    # Decision 14: within the window, at least minimumCalls (10) calls, 50 % of them failed
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
    # network-level, so it counts on its own (decision 14).
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
