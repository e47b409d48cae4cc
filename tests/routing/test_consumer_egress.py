"""The egress-bucketed lock, end to end through the chat consumer.

Some providers count quota per egress address rather than per key. For a provider flagged
``egress_bucketed_lock``, every attempt's egress (the connection's ``proxy_url``, else
``direct``) goes to the proxy log in the background, and a 429 classified quota exhausted or
rate limited cools the failing connection and every sibling seen behind the same egress in the
last 24 h (``routing/proxy/guards/egress.py``). Here c1 and c2 go direct and c3 through a proxy
(which
the ``httpx.MockTransport`` ignores); the resilience state lives in a ``MemoryStore`` on the fake
clock of ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from channels.db import database_sync_to_async

import routing.proxy.guards.egress as egress_guard
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_key
from routing.models import Combo, Provider, ProxyLog
from routing.services import combo_save
from tests.routing.harness import (
    OK,
    RATE_LIMITED,
    Behaviour,
    Gateway,
    add_connection,
    add_provider,
    error,
)

pytestmark = pytest.mark.django_db(transaction=True)

C1, C2, C3 = "sk-edge-ONE-0001", "sk-edge-TWO-0002", "sk-edge-THREE-0003"
PROXY = "http://proxy.test:3128"
QUOTA_429 = error(429, "Quota exceeded for this key")  # quota_exhausted, not credits
CREDITS_429 = error(429, "You exceeded your current quota, please check your plan and billing")


@dataclass(frozen=True)
class Trio:
    """c1 and c2 direct, c3 behind ``PROXY``; tried in that order."""

    provider: str
    c1: int
    c2: int
    c3: int

    @property
    def model(self) -> str:
        return f"{self.provider}/m1"


def add_trio(provider: Provider, *, uncooled: str = "") -> Trio:
    """The three connections (``uncooled`` names one with ``disable_cooling``), and a combo
    ``<provider>-<name>`` pinned to each."""
    c1 = add_connection(provider, "c1", C1, priority=10, disable_cooling=uncooled == "c1")
    c2 = add_connection(provider, "c2", C2, priority=20, disable_cooling=uncooled == "c2")
    c3 = add_connection(provider, "c3", C3, priority=30, proxy_url=PROXY)
    for name, pinned in (("c1", c1), ("c2", c2), ("c3", c3)):
        target = {"provider": provider, "model": "m1", "connection_id": pinned}
        combo_save(combo=Combo(), fields={"name": f"{provider.slug}-{name}"}, targets=[target])
    return Trio(provider.slug, c1, c2, c3)


async def settle() -> None:
    """Wait for the proxy-log writes running in the background."""
    await asyncio.gather(*list(egress_guard._background))


async def serve_once(gateway: Gateway, trio: Trio, *names: str) -> None:
    """Send one request to each named connection (its pinned combo), then settle the log."""
    for name in names:
        await gateway.call(f"{trio.provider}-{name}")
    await settle()


def hours_ago(gateway: Gateway, hours: float) -> dt.datetime:
    """A time ``hours`` before the fake clock's now (the lock's 24 h look back reads it)."""
    return dt.datetime.fromtimestamp(gateway.clock.now, dt.UTC) - dt.timedelta(hours=hours)


@pytest.fixture
async def proxy_log() -> AsyncIterator[None]:
    """Forget the per-process log throttle (connection ids repeat across flushed tests)."""
    egress_guard._logged.clear()
    yield
    await settle()
    egress_guard._logged.clear()


@pytest.fixture
def edge(db: None) -> Provider:
    return add_provider("edge", egress_bucketed_lock=True)


@pytest.fixture
def trio(edge: Provider) -> Trio:
    return add_trio(edge)


@pytest.fixture
def serving(gateway: Gateway) -> Gateway:
    """The gateway with every connection answering 200."""
    gateway.fake.behaviours.update({C1: OK, C2: OK, C3: OK})
    return gateway


# --- the lock -------------------------------------------------------------------------------


async def test_serving_logs_each_connections_egress(
    serving: Gateway, trio: Trio, proxy_log: None
) -> None:
    await serve_once(serving, trio, "c1", "c2", "c3")

    rows = ProxyLog.objects.order_by("connection_id").values_list(
        "provider", "connection_id", "egress"
    )
    assert [row async for row in rows] == [
        ("edge", trio.c1, "direct"),
        ("edge", trio.c2, "direct"),
        ("edge", trio.c3, PROXY),
    ]


@pytest.mark.parametrize("answer", [RATE_LIMITED, QUOTA_429], ids=["rate-limit", "quota"])
async def test_a_429_cools_the_siblings_behind_the_same_egress_only(
    serving: Gateway, trio: Trio, proxy_log: None, answer: Behaviour
) -> None:
    gateway = serving
    await serve_once(gateway, trio, "c1", "c2", "c3")
    gateway.fake.behaviours[C1] = answer
    gateway.fake.requests.clear()
    # when: c1 answers 429
    reply = await gateway.call(trio.model)
    # then: c2 (same egress) is cooled with c1, c3 (behind the proxy) is not and serves
    assert (reply.status, reply.connection) == (200, trio.c3)
    one, two = await gateway.state(trio.c1), await gateway.state(trio.c2)
    assert one.remaining(gateway.clock.now) > 0
    assert two.remaining(gateway.clock.now) > 0
    assert (two.test_status, two.rate_limited_until) == ("unavailable", one.rate_limited_until)
    assert await gateway.cooling_for(trio.c3) == 0
    # and: the next requests go straight to c3
    for _ in range(3):
        assert (await gateway.call(trio.model)).connection == trio.c3
    assert gateway.fake.calls == [C1, C3, C3, C3, C3]


# --- what the lock leaves alone -------------------------------------------------------------


async def test_a_terminal_sibling_stays_terminal(
    serving: Gateway, trio: Trio, proxy_log: None
) -> None:
    gateway = serving
    gateway.fake.behaviours[C2] = error(401, "Incorrect API key provided")
    await serve_once(gateway, trio, "c1", "c2", "c3")  # c2's 401 makes it expired
    assert (await gateway.state(trio.c2)).test_status == "expired"
    gateway.fake.behaviours[C1] = RATE_LIMITED

    assert (await gateway.call(trio.model)).connection == trio.c3

    assert await gateway.cooling_for(trio.c1) > 0
    two = await gateway.state(trio.c2)
    assert (two.test_status, two.rate_limited_until) == ("expired", None)


async def test_a_sibling_cooling_longer_keeps_its_longer_cooldown(
    serving: Gateway, trio: Trio, proxy_log: None
) -> None:
    gateway = serving
    await serve_once(gateway, trio, "c1", "c2", "c3")
    # c2 alone cools, for 600 s (an account-wide refusal that left no egress lock)
    until = gateway.clock.now + 600
    cooling = ConnectionState("unavailable", until, 1, "busy", gateway.clock.now, "", "503")
    await gateway.store.set(connection_key(trio.c2), cooling.to_dict())
    before = await gateway.state(trio.c2)
    assert before.remaining(gateway.clock.now) == 600
    gateway.fake.behaviours[C1] = RATE_LIMITED

    assert (await gateway.call(trio.model)).connection == trio.c3

    assert 0 < await gateway.cooling_for(trio.c1) < 600
    assert await gateway.state(trio.c2) == before


@pytest.mark.parametrize("uncooled", ["c1", "c2"])
async def test_disable_cooling_skips_the_lock(
    serving: Gateway, edge: Provider, proxy_log: None, uncooled: str
) -> None:
    # given: c1 (the failing connection) or c2 (its sibling) has disable_cooling
    trio = await database_sync_to_async(add_trio)(edge, uncooled=uncooled)
    gateway = serving
    await serve_once(gateway, trio, "c1", "c2", "c3")
    gateway.fake.behaviours[C1] = RATE_LIMITED
    # when
    reply = await gateway.call(trio.model)
    # then: c2 is never cooled, and c1 only when its own cooling is on
    assert reply.connection == trio.c2
    assert await gateway.cooling_for(trio.c2) == 0
    assert (await gateway.cooling_for(trio.c1) > 0) is (uncooled == "c2")
    assert (await gateway.state(trio.c1)).error_code == "429"


async def test_without_the_provider_flag_only_the_failing_connection_cools(
    serving: Gateway, proxy_log: None
) -> None:
    gateway = serving
    # quota per account (so the 429 cools the connection), but not per egress
    plain = await database_sync_to_async(add_provider)("acme", per_model_quota=False)
    trio = await database_sync_to_async(add_trio)(plain)
    await serve_once(gateway, trio, "c1", "c2", "c3")
    for connection_id, egress in ((trio.c1, "direct"), (trio.c2, "direct"), (trio.c3, PROXY)):
        await ProxyLog.objects.aupdate_or_create(
            connection_id=connection_id,
            egress=egress,
            defaults={"provider": "acme", "seen_at": hours_ago(gateway, 0)},
        )
    gateway.fake.behaviours[C1] = RATE_LIMITED

    reply = await gateway.call(trio.model)

    assert reply.connection == trio.c2
    assert await gateway.cooling_for(trio.c1) > 0
    assert await gateway.cooling_for(trio.c2) == 0


@pytest.mark.parametrize(("hours", "cooled"), [(23.9, True), (24.1, False)])
async def test_only_a_sibling_seen_in_the_last_24_hours_is_cooled(
    serving: Gateway, trio: Trio, proxy_log: None, hours: float, cooled: bool
) -> None:
    # given: c1 and c3 served just now; c2 was last seen direct ``hours`` ago
    gateway = serving
    await serve_once(gateway, trio, "c1", "c3")
    await ProxyLog.objects.acreate(
        provider="edge", connection_id=trio.c2, egress="direct", seen_at=hours_ago(gateway, hours)
    )
    gateway.fake.behaviours[C1] = RATE_LIMITED
    # when
    reply = await gateway.call(trio.model)
    # then
    assert (await gateway.cooling_for(trio.c2) > 0) is cooled
    assert reply.connection == (trio.c3 if cooled else trio.c2)


async def test_only_the_last_known_egress_of_a_sibling_counts(
    serving: Gateway, trio: Trio, proxy_log: None
) -> None:
    # given: c2 went direct 2 h ago, then through the proxy 1 h ago
    gateway = serving
    await serve_once(gateway, trio, "c1", "c3")
    for egress, hours in (("direct", 2), (PROXY, 1)):
        await ProxyLog.objects.acreate(
            provider="edge", connection_id=trio.c2, egress=egress, seen_at=hours_ago(gateway, hours)
        )
    gateway.fake.behaviours[C1] = RATE_LIMITED
    # when: c1 (direct) answers 429
    reply = await gateway.call(trio.model)
    # then: c2 is not behind c1's egress any more, so it is not cooled and serves
    assert await gateway.cooling_for(trio.c2) == 0
    assert reply.connection == trio.c2


# --- never terminal -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flagged", "status"), [(True, "unavailable"), (False, "credits_exhausted")]
)
async def test_a_429_never_makes_the_failing_connection_terminal_on_a_flagged_provider(
    serving: Gateway, proxy_log: None, flagged: bool, status: str
) -> None:
    gateway = serving
    provider = await database_sync_to_async(add_provider)("edge", egress_bucketed_lock=flagged)
    trio = await database_sync_to_async(add_trio)(provider)
    await serve_once(gateway, trio, "c1", "c2", "c3")
    gateway.fake.behaviours[C1] = CREDITS_429
    # when: c1 answers 429 with credits-exhausted wording, twice (its cooldown over between)
    for _ in range(2):
        await gateway.call(trio.model)
        gateway.clock.advance(await gateway.cooling_for(trio.c1))
    # then: terminal without the flag; with it, a cooldown only, and it is asked again
    one = await gateway.state(trio.c1)
    assert (one.test_status, one.error_code) == (status, "429")
    assert gateway.fake.calls.count(C1) == (3 if flagged else 2)
