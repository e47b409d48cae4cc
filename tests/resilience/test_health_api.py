"""``/api/monitoring/health`` and ``/api/resilience/reset``."""

from __future__ import annotations

import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from rest_framework.test import APIClient

from omniroute.core.store import StateStore
from resilience.api import health
from resilience.domain.breaker.machine import Breaker, BreakerState
from resilience.models import CircuitBreaker
from resilience.services.breakers import breaker_list
from tests.resilience.conftest import FailProvider

pytestmark = pytest.mark.django_db

HEALTH = "/api/monitoring/health"
RESET = "/api/resilience/reset"
PAYLOAD_KEYS = {
    "status",
    "timestamp",
    "providerBreakers",
    "windowGate",
    "store",
    "lockouts",
    "admission",
}


def payload_keys(payload: dict[str, object]) -> set[str]:
    """The full payload's keys; with ``reason`` exactly while the store is degraded (a Redis
    call past its timeout on a loaded machine degrades it for a second)."""
    store = payload["store"]
    degraded = isinstance(store, dict) and store.get("degraded")
    return PAYLOAD_KEYS | ({"reason"} if degraded else set())


def states(store: StateStore) -> dict[str, str]:
    breakers = async_to_sync(breaker_list)(store=store)
    return {name: breaker.state.value for name, breaker in breakers.items()}


def row_states() -> dict[str, str]:
    return dict(CircuitBreaker.objects.values_list("name", "state"))


# --- GET --------------------------------------------------------------------------------------


def test_anonymous_get_is_only_the_status(
    api_client: APIClient, fail_provider: FailProvider
) -> None:
    assert api_client.get(HEALTH).json() == {"status": "ok"}
    health._cache.drop()
    fail_provider("openai")

    response = api_client.get(HEALTH)

    assert response.status_code == 200
    assert response.json() == {"status": "degraded"}


def test_a_key_without_manage_is_only_the_status(
    plain_client: APIClient, process_store: StateStore
) -> None:
    response = plain_client.get(HEALTH)

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_manage_key_gets_every_breaker(
    manage_client: APIClient, fail_provider: FailProvider
) -> None:
    policy = fail_provider("openai")
    fail_provider("anthropic", times=7)

    response = manage_client.get(HEALTH)

    assert response.status_code == 200
    payload = response.json()
    assert set(payload) == payload_keys(payload)
    assert payload["status"] == "degraded"
    assert payload["windowGate"] == {"enabled": False}
    anthropic, openai = payload["providerBreakers"]
    assert (anthropic["name"], anthropic["state"], anthropic["failureCount"]) == (
        "anthropic",
        "degraded",
        7,
    )
    assert anthropic["retryAfterMs"] == 0
    assert (openai["name"], openai["state"], openai["failureCount"]) == ("openai", "open", 12)
    assert 0 < openai["retryAfterMs"] <= policy.reset_timeout * 1000
    assert openai["degradationThreshold"] == 7
    assert openai["effectiveResetTimeout"] == 30_000
    assert [step["reason"] for step in openai["transitionHistory"]] == ["degraded", "threshold"]


def test_staff_session_gets_the_full_payload(
    staff_client: Client, fail_provider: FailProvider
) -> None:
    fail_provider("openai")

    payload = staff_client.get(HEALTH).json()

    assert set(payload) == payload_keys(payload)
    assert [b["name"] for b in payload["providerBreakers"]] == ["openai"]


def test_the_payload_is_cached_for_one_second(
    manage_client: APIClient, fail_provider: FailProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_monotonic, shift = time.monotonic, [0.0]
    monkeypatch.setattr(health.time, "monotonic", lambda: real_monotonic() + shift[0])
    assert manage_client.get(HEALTH).json()["providerBreakers"] == []
    fail_provider("openai")

    cached = manage_client.get(HEALTH).json()
    shift[0] = health.CACHE_SECONDS
    rebuilt = manage_client.get(HEALTH).json()

    assert (cached["status"], cached["providerBreakers"]) == ("ok", [])
    assert rebuilt["status"] == "degraded"
    assert [b["state"] for b in rebuilt["providerBreakers"]] == ["open"]


# --- DELETE -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "status"), [("api_client", 401), ("plain_client", 403)])
def test_delete_needs_an_operator(
    request: pytest.FixtureRequest, fail_provider: FailProvider, client: str, status: int
) -> None:
    fail_provider("openai")

    response = request.getfixturevalue(client).delete(HEALTH)

    assert response.status_code == status
    assert row_states() == {"openai": "open"}


def test_delete_resets_and_forgets_every_breaker(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=1)
    ghost = Breaker(state=BreakerState.OPEN, failure_count=5, last_failure_at=time.time())
    CircuitBreaker.objects.create(name="ghost", state="open", options=ghost.to_dict())
    assert manage_client.get(HEALTH).json()["status"] == "degraded"

    response = manage_client.delete(HEALTH)

    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "message": "Reset 3 circuit breaker(s) to healthy state",
        "resetCount": 3,
    }
    assert row_states() == {}
    assert states(process_store) == {}
    assert manage_client.get(HEALTH).json()["providerBreakers"] == []  # the cache was dropped


# --- POST /api/resilience/reset ---------------------------------------------------------------


@pytest.mark.parametrize(("client", "status"), [("api_client", 401), ("plain_client", 403)])
def test_reset_needs_an_operator(
    request: pytest.FixtureRequest, fail_provider: FailProvider, client: str, status: int
) -> None:
    fail_provider("openai")

    response = request.getfixturevalue(client).post(RESET)

    assert response.status_code == status
    assert row_states() == {"openai": "open"}


def test_reset_closes_every_breaker_and_keeps_them(
    manage_client: APIClient, fail_provider: FailProvider, process_store: StateStore
) -> None:
    fail_provider("openai")
    fail_provider("anthropic", times=7)
    assert manage_client.get(HEALTH).json()["status"] == "degraded"

    response = manage_client.post(RESET)

    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    assert body == {"ok": True, "resetCount": 2, "message": "Reset 2 circuit breaker(s)"}
    assert states(process_store) == {"anthropic": "closed", "openai": "closed"}
    assert row_states() == {"anthropic": "closed", "openai": "closed"}
    after = manage_client.get(HEALTH).json()
    assert after["status"] == "ok"
    assert {b["state"] for b in after["providerBreakers"]} == {"closed"}
