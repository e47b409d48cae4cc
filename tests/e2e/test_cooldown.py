"""Connection cooldowns through real HTTP: a 429 with Retry-After cools only that key.

The gateway runs in its own process, whose clock cannot be injected: this test waits out the
upstream's 7 s Retry-After, polling in bounded steps.
"""

from __future__ import annotations

import time

import httpx
import pytest

from routing.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

RETRY_AFTER_SECONDS = 7
MESSAGES = [{"role": "user", "content": "x"}]


def ask(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post("/chat/completions", json={"model": model, "messages": MESSAGES})


def test_a_429_with_retry_after_cools_only_that_connection_for_that_long(
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
    assert state["test_status"] == "unavailable" and state["last_error_type"]
