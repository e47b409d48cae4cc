"""An open provider breaker survives a Redis that restarts empty.

The gateway's store is a ``ResilientStore`` on this module's own ``redis-server``
(``tests/redis_server.py``), which is killed and started again, empty, on the same port. The
breaker's durable row must be back in the store before the first request after the restart
reads it: that request is refused by the open breaker, and the failing upstream is not asked.
Two ways back: the restart falls between two calls (no call saw Redis down), or calls saw the
outage and the store served from process-local state until Redis answered again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from omniroute.core import tasks
from omniroute.core.store import RedisStore
from omniroute.core.store.resilient import ResilientStore
from resilience.domain.breaker.machine import BreakerState
from resilience.services.housekeeping import housekeeping_settle
from tests.databases import redis_prefix
from tests.redis_server import RedisServer, running_redis
from tests.resilience.conftest import FakeClock as Monotonic
from tests.routing.breaker_support import A_MODEL, A_SECRET, THRESHOLD, trip
from tests.routing.harness import UNAVAILABLE, FakeClock, FakeUpstream, Gateway

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT_SECONDS = 1.0  # generous: these tests are about a restart, not about the timeout
RETRY_INTERVAL = 1.0


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
def monotonic() -> Monotonic:
    return Monotonic(start=0.0)


@pytest.fixture
async def redis_gateway(
    gateway: Gateway, redis_server: RedisServer, clock: FakeClock, monotonic: Monotonic
) -> AsyncIterator[Gateway]:
    """``gateway`` with its state in ``redis_server`` instead of process memory."""
    store = ResilientStore(
        RedisStore(redis_server.url, prefix=redis_prefix(), clock=clock),
        timeout=TIMEOUT_SECONDS,
        retry_interval=RETRY_INTERVAL,
        monotonic=monotonic,
    )
    yield Gateway(gateway.key, gateway.fake, clock, store)
    await housekeeping_settle()
    await tasks.flush()
    await store.close()


@pytest.mark.parametrize("outage_seen", [False, True], ids=["between-calls", "after-outage"])
async def test_an_open_breaker_refuses_the_first_requests_after_redis_restarts_empty(
    redis_gateway: Gateway,
    redis_server: RedisServer,
    monotonic: Monotonic,
    acme_primary: int,
    thresholds: None,
    outage_seen: bool,
) -> None:
    # given: acme's breaker is open, in Redis and (written through) in the database
    fake: FakeUpstream = redis_gateway.fake
    fake.behaviours[A_SECRET] = UNAVAILABLE
    await trip(redis_gateway)
    await tasks.flush()
    assert (await redis_gateway.breaker("acme")).state is BreakerState.OPEN
    asked = len(fake.calls)
    assert asked == THRESHOLD + 1

    # when: Redis is killed and comes back empty on the same port
    redis_server.kill()
    if outage_seen:
        store = redis_gateway.store
        assert isinstance(store, ResilientStore)
        await store.get("anything")  # answered locally: the store is degraded
        assert store.degraded
        monotonic.advance(RETRY_INTERVAL)
    await asyncio.to_thread(redis_server.start)

    # then: the next requests are refused by the open breaker, and acme is not asked
    for _ in range(3):
        reply = await redis_gateway.call(A_MODEL)
        assert (reply.status, reply.json()["error"]["code"]) == (503, "provider_circuit_open")
    assert len(fake.calls) == asked
