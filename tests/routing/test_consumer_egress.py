"""The egress-bucketed lock (reference-part1 §7.5), end to end through the chat consumer.

Some providers count quota per egress address rather than per key. For a provider flagged
``egress_bucketed_lock``, every attempt's egress (the connection's ``proxy_url``, else
``direct``) goes to the proxy log in the background, and a 429 classified quota exhausted or
rate limited cools the failing connection and every sibling seen behind the same egress in the
last 24 h (``routing/guards/egress.py``). Here c1 and c2 go direct and c3 through a proxy (which
the ``httpx.MockTransport`` ignores); the resilience state lives in a ``MemoryStore`` on the fake
clock of ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import pytest
from channels.db import database_sync_to_async

import routing.guards.egress as egress_guard
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_key
from routing.models import Combo, Provider, ProxyLog
from routing.services import combo_save
from tests.routing.harness import (
    OK,
    RATE_LIMITED,
    Gateway,
    add_connection,
    add_provider,
    error,
)

pytestmark = pytest.mark.django_db(transaction=True)

C1, C2, C3 = "sk-edge-ONE-0001", "sk-edge-TWO-0002", "sk-edge-THREE-0003"
PROXY = "http://proxy.test:3128"
QUOTA_429 = error(429, "You exceeded your current quota, please check your plan and billing")
CREDITS_429 = error(429, "Your credit balance is too low: insufficient_quota")
DAY = dt.timedelta(hours=24)


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


def add_trio(provider: Provider, *, c1_disable_cooling: bool = False) -> Trio:
    c1 = add_connection(provider, "c1", C1, priority=10, disable_cooling=c1_disable_cooling)
    c2 = add_connection(provider, "c2", C2, priority=20)
    c3 = add_connection(provider, "c3", C3, priority=30, proxy_url=PROXY)
    for name, pinned in (("c1", c1), ("c2", c2), ("c3", c3)):  # one combo pinned to each
        target = {"provider": provider, "model": "m1", "connection_id": pinned}
        combo_save(combo=Combo(), fields={"name": f"{provider.slug}-{name}"}, targets=[target])
    return Trio(provider.slug, c1, c2, c3)


async def settle() -> None:
    """Wait for the proxy-log writes running in the background."""
    await asyncio.gather(*list(egress_guard._background))


async def serve_once(gateway: Gateway, trio: Trio, *names: str) -> None:
    """Let each named connection serve one request (its combo is pinned to it), then settle."""
    for name in names:
        assert (await gateway.call(f"{trio.provider}-{name}")).status < 500
    await settle()


def seen(provider: str, connection_id: int, egress: str, at: dt.datetime) -> None:
    ProxyLog.objects.update_or_create(
        connection_id=connection_id, egress=egress, defaults={"provider": provider, "seen_at": at}
    )


def fake_now(gateway: Gateway) -> dt.datetime:
    return dt.datetime.fromtimestamp(gateway.clock.now, dt.UTC)


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
    serving: Gateway, trio: Trio, proxy_log: None, answer: object
) -> None:
    gateway = serving
    await serve_once(gateway, trio, "c1", "c2", "c3")
    gateway.fake.behaviours[C1] = answer  # type: ignore[assignment]
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
