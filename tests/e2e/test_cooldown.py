"""Upstream hints through real HTTP: a 429 with Retry-After takes out only that (key, model)
pair, for exactly that long; the connection itself keeps serving.

The gateway runs in its own process, whose clock cannot be injected: this test waits out the
upstream's 7 s Retry-After, polling in bounded steps.
"""

from __future__ import annotations

import time

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

RETRY_AFTER_SECONDS = 7
MESSAGES = [{"role": "user", "content": "x"}]


def ask(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post("/chat/completions", json={"model": model, "messages": MESSAGES})


def test_a_429_with_retry_after_locks_only_that_pair_for_that_long(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"status": 429, "retry_after": RETRY_AFTER_SECONDS}, {})
    first = ask(gateway, route.key, route.model())
    cooled_at = time.monotonic()
    assert first.status_code == 200
    assert f"connection={route.connections[1]}" in first.headers["x-omniroute-decision"]

    served_by_second = 0
    while time.monotonic() - cooled_at < RETRY_AFTER_SECONDS - 1:
        response = ask(gateway, route.key, route.model())
        assert response.status_code == 200
        assert "attempts=1" in response.headers["x-omniroute-decision"]
        served_by_second += 1
        time.sleep(0.5)
    assert served_by_second >= 5
    assert len(records(fake, route, 1)) == 1  # untouched while cooling

    time.sleep(max(0.0, RETRY_AFTER_SECONDS + 0.3 - (time.monotonic() - cooled_at)))
    again = ask(gateway, route.key, route.model())
    assert again.status_code == 200
    assert len(records(fake, route, 1)) == 2  # used again once the cooldown elapsed

    health = gateway.api.get("/api/monitoring/health").json()
    breaker = next((b for b in health["providerBreakers"] if b["name"] == route.provider), None)
    assert breaker is None or (breaker["state"], breaker["failureCount"]) == ("closed", 0)
    state = gateway.api.get(f"/api/connections/{route.connections[0]}/").json()
    assert (state["test_status"], state["rate_limited_until"]) == ("active", None)


def test_a_hinted_429_lock_is_listed_with_its_class(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, {"status": 429, "retry_after": 30}, {})
    assert ask(gateway, route.key, route.model("a")).status_code == 200

    items = gateway.api.get("/api/resilience/model-cooldowns").json()["items"]
    (lock,) = [item for item in items if item["provider"] == route.provider]
    assert (lock["connectionId"], lock["model"]) == (route.connections[0], "a")
    assert lock["timerClass"] == "upstream_hinted" and 25_000 < lock["remainingMs"] <= 30_000
    assert _health_lists_a_lock(gateway, route.provider, timeout=3)  # health is cached 1 s


def _health_lists_a_lock(gateway: Gateway, provider: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = gateway.api.get("/api/monitoring/health").json()
        if any(item["provider"] == provider for item in health["lockouts"]):
            return True
        time.sleep(0.2)
    return False
