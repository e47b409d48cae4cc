"""Health while the state store is degraded, the lockouts in the operator payload, and
``/readyz``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from omniroute.core.state import get_store, store_backend
from omniroute.core.store import StateStore
from omniroute.core.store.resilient import ResilientStore
from resilience.api import health
from resilience.domain.lockout import LockScope
from resilience.hooks import hooks
from routing.apps import health_policies
from routing.snapshot import snapshot_clear
from tests.conftest import free_port
from tests.core.store.switched import SwitchedStore
from tests.databases import redis_prefix
from tests.resilience.conftest import FakeClock
from tests.resilience.lockout_support import lock

pytestmark = pytest.mark.django_db

HEALTH = "/api/monitoring/health"
READYZ = "/readyz"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def unreachable_store(settings: Settings) -> Iterator[ResilientStore]:
    """The process store pointed at a port where no Redis listens."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDIS_PREFIX = redis_prefix()
    get_store.cache_clear()
    health._cache.drop()
    snapshot_clear()
    store = get_store()
    assert isinstance(store, ResilientStore)
    yield store
    get_store.cache_clear()
    health._cache.drop()
    snapshot_clear()


def test_an_unreachable_store_makes_health_degraded(
    unreachable_store: ResilientStore, api_client: APIClient, manage_client: APIClient
) -> None:
    anonymous = api_client.get(HEALTH)
    payload = manage_client.get(HEALTH).json()

    assert (anonymous.status_code, anonymous.json()) == (200, {"status": "degraded"})
    assert payload["status"] == "degraded"
    assert payload["reason"].startswith("state store unreachable: ConnectionError")
    assert payload["reason"].endswith("; serving from process-local state")
    store = payload["store"]
    assert (store["backend"], store["degraded"]) == ("redis", True)
    assert store["reason"].startswith("ConnectionError") and store["since"]
    assert payload["providerBreakers"] == [] and payload["lockouts"] == []


def test_health_follows_the_store_without_waiting_for_the_cache(
    manage_client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    primary = SwitchedStore(FakeClock())
    store = ResilientStore(cast(StateStore, primary), timeout=1.0, monotonic=FakeClock())
    monkeypatch.setattr(health, "get_store", lambda: store)
    health._cache.drop()
    try:
        assert manage_client.get(HEALTH).json()["status"] == "ok"
        primary.mode = "down"
        async_to_sync(store.get)("x")  # a request notices the outage

        assert manage_client.get(HEALTH).json()["status"] == "degraded"  # not the cached "ok"
    finally:
        health._cache.drop()


def test_routing_hands_in_the_breaker_policies() -> None:
    assert hooks().health_policies is health_policies


def test_readiness_ignores_an_unreachable_store(
    unreachable_store: ResilientStore, api_client: APIClient
) -> None:
    response = api_client.get(READYZ)

    assert (response.status_code, response.json()) == (200, {"status": "ready"})


def test_a_healthy_store_section(manage_client: APIClient, process_store: StateStore) -> None:
    payload = manage_client.get(HEALTH).json()

    assert payload["status"] == "ok" and "reason" not in payload
    assert payload["store"] == {
        "backend": store_backend(process_store),
        "degraded": False,
        "reason": None,
        "since": None,
    }


def test_operators_see_the_active_lockouts(
    manage_client: APIClient, api_client: APIClient, process_store: StateStore
) -> None:
    lock(process_store, "openai", 7, "gpt-4o", seconds=60, scope=LockScope.EXACT)
    lock(process_store, "anthropic", 8, "claude-x", seconds=30, scope=LockScope.EXACT)
    now_ms = time.time() * 1000

    payload = manage_client.get(HEALTH).json()

    first, second = payload["lockouts"]
    assert set(first) == {
        "provider",
        "connectionId",
        "model",
        "reason",
        "remainingMs",
        "until",
        "failureCount",
    }
    assert (first["provider"], first["connectionId"], first["model"]) == ("openai", 7, "gpt-4o")
    assert (second["provider"], second["model"]) == ("anthropic", "claude-x")
    assert first["reason"] and first["failureCount"] == 1
    assert 55_000 < first["remainingMs"] <= 60_000
    assert 55_000 < first["until"] - now_ms <= 61_000
    assert api_client.get(HEALTH).json() == {"status": "ok"}  # lockouts do not degrade health


DATABASE_SECRET = 'password "db-hunter2" for user "omniroute" at db.internal'


class _UnreachableDatabase:
    def cursor(self) -> object:
        raise OperationalError(f"could not connect to server: {DATABASE_SECRET}")


def test_readiness_follows_the_database_and_names_no_detail(
    api_client: APIClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert api_client.get(READYZ).json() == {"status": "ready"}

    monkeypatch.setattr(health, "connection", _UnreachableDatabase())
    with caplog.at_level(logging.WARNING, logger=health.logger.name):
        response = api_client.get(READYZ)

    assert response.status_code == 503
    assert response.json() == {"status": "not ready", "reason": "database unavailable"}
    body = response.content.decode()
    for detail in ("db-hunter2", "db.internal", "OperationalError", "could not connect"):
        assert detail not in body
    # The operator still learns why, from the log.
    assert "OperationalError: could not connect to server" in caplog.text


def test_readiness_needs_no_credentials(api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION="Bearer sk-stale-key")

    assert api_client.get(READYZ).status_code == 200


@pytest.mark.parametrize(
    "module",
    ["resilience/api/health.py", "omniroute/core/state.py", "resilience/services/housekeeping.py"],
)
def test_resilience_does_not_import_routing(module: str) -> None:
    source = (ROOT / module).read_text()

    assert "from routing" not in source and "import routing" not in source
