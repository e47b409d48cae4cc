"""The resilience gauges of ``/metrics`` (read from the state store at scrape time), and the
probes while Redis is down: degraded health, yet alive and ready.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pytest_django.fixtures import Settings

from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.api import health
from resilience.domain.connection_state import ConnectionState
from resilience.domain.lockout import LockScope
from resilience.services.connections import connection_key
from routing.snapshot import snapshot_clear
from tests.conftest import free_port
from tests.databases import redis_prefix
from tests.resilience.conftest import FailProvider
from tests.resilience.lockout_support import lock

pytestmark = pytest.mark.django_db


def gauges(text: str) -> dict[str, float]:
    """Each sample of the exposition, by name and labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


def test_the_gauges_follow_the_store(
    process_store: StateStore, fail_provider: FailProvider
) -> None:
    # given: one open breaker, one cooling and one banned connection, two locked models
    fail_provider("openai")
    now = process_store.clock()
    cooling = ConnectionState(rate_limited_until=now + 60)
    banned = ConnectionState(test_status="banned")
    async_to_sync(process_store.set)(connection_key(1), cooling.to_dict())
    async_to_sync(process_store.set)(connection_key(2), banned.to_dict())
    lock(process_store, "openai", 7, "gpt-4o", seconds=60, scope=LockScope.EXACT)
    lock(process_store, "openai", 7, "gpt-4o-mini", seconds=60, scope=LockScope.EXACT)

    # when
    found = gauges(Client().get("/metrics").content.decode())

    # then
    assert found["omniroute_breakers{state=open}"] == 1.0
    assert found["omniroute_breakers{state=closed}"] == 0.0
    assert found["omniroute_cooling_connections"] == 1.0
    assert found["omniroute_terminal_connections"] == 1.0
    assert found["omniroute_locked_models"] == 2.0


@pytest.fixture
def redis_down(settings: Settings) -> Iterator[None]:
    """The process store pointed at a port where no Redis listens."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDIS_PREFIX = redis_prefix()
    get_store.cache_clear()
    health._cache.drop()
    snapshot_clear()
    yield
    get_store.cache_clear()
    health._cache.drop()
    snapshot_clear()


def test_a_redis_outage_is_degraded_but_alive_and_ready(redis_down: None) -> None:
    client = Client()

    assert client.get("/api/monitoring/health").json() == {"status": "degraded"}
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/metrics").status_code == 200  # the store falls back to process-local state
