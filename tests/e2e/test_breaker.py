"""The provider breaker through real HTTP: open, short-circuit, probe, close, and combos.

These tests change the ``local`` profile's breaker settings (threshold 2, reset 1 s) and use
``local`` providers only; every other e2e test uses API-key providers, so they are unaffected.
The gateway runs in its own process, whose clock cannot be injected: the one wait here is a
bounded poll for the 1 s reset timeout.

A 5xx is pinned to its (connection, model) pair until a second pair of the provider fails,
so each failing provider here has two connections that both answer 503:
the first request's first failure is pinned, its second counts, and the second request's
first failure opens the breaker. The attempt policy's retries are off here
(``attempts.retriesPerTarget`` 0), so each upstream call is one the breaker judges.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import (
    Gateway,
    make_route,
    prepare_gateway,
    records,
    scenario_url,
    serving,
)

pytestmark = pytest.mark.e2e

FAST_LOCAL = {"failureThreshold": 2, "degradationThreshold": 1, "resetTimeoutMs": 1000}
DOWN = {"status": 503}
NO_RETRIES = {"retriesPerTarget": 0}
MESSAGES = [{"role": "user", "content": "x"}]


@pytest.fixture
def fast_local_breaker(gateway: Gateway) -> Iterator[None]:
    current = gateway.api.get("/api/resilience").json()
    before = {
        "providerBreaker": {"local": current["providerBreaker"]["local"]},
        "attempts": current["attempts"],
    }
    fast = {"providerBreaker": {"local": FAST_LOCAL}, "attempts": NO_RETRIES}
    patch = gateway.api.patch("/api/resilience", json=fast)
    assert patch.status_code == 200, patch.text
    yield
    gateway.api.patch("/api/resilience", json=before)


def ask(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post("/chat/completions", json={"model": model, "messages": MESSAGES})


def breaker_of(gateway: Gateway, provider: str) -> dict[str, Any] | None:
    payload = gateway.api.get("/api/monitoring/health").json()
    return next((b for b in payload["providerBreakers"] if b["name"] == provider), None)


def test_open_breaker_short_circuits_then_one_probe_closes_it(
    gateway: Gateway, fake: FakeUpstream, fast_local_breaker: None
) -> None:
    route = make_route(gateway, fake, DOWN, DOWN, category="local", disable_cooling=True)
    assert ask(gateway, route.key, route.model()).status_code == 503  # c1, c2
    assert ask(gateway, route.key, route.model()).status_code == 503  # c1: opens

    refused = ask(gateway, route.key, route.model())
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "provider_circuit_open"
    assert refused.json()["error"]["provider"] == route.provider
    assert refused.headers["x-omniroute-provider-breaker"] == "open"
    assert int(refused.headers["retry-after"]) >= 1
    assert len(records(fake, route)) == 3
    assert _state_within(gateway, route.provider, "open", timeout=3)

    healthy = scenario_url(fake, route.provider, 1, {})
    gateway.api.patch(f"/api/connections/{route.connections[0]}/", json={"base_url": healthy})
    answered, probes = _poll_until_served(gateway, route.key, route.model(), timeout=5)
    assert answered.status_code == 200
    # The refused polls never reached the upstream: only probes did. Usually the one that
    # closes it; a probe let through before this process saw the new URL (the configuration
    # is re-read within a second) meets the old 503 and opens the breaker again.
    assert len(records(fake, route)) == 3 + probes
    assert _state_within(gateway, route.provider, "closed", timeout=3)  # health is cached 1 s


def _state_within(gateway: Gateway, provider: str, state: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while (breaker_of(gateway, provider) or {}).get("state") != state:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _poll_until_served(
    gateway: Gateway, key: str, model: str, timeout: float
) -> tuple[httpx.Response, int]:
    """The first answer that is not a 503, and how many polls the breaker let through."""
    deadline, probes = time.monotonic() + timeout, 0
    while True:
        response = ask(gateway, key, model)
        probes += not _refused_by_breaker(response)
        if response.status_code != 503 or time.monotonic() > deadline:
            return response, probes
        time.sleep(0.1)


def _refused_by_breaker(response: httpx.Response) -> bool:
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return response.status_code == 503 and code == "provider_circuit_open"


def test_combo_traffic_moves_to_the_next_provider_while_one_is_open(
    gateway: Gateway, fake: FakeUpstream, fast_local_breaker: None
) -> None:
    failing = make_route(gateway, fake, DOWN, DOWN, category="local", disable_cooling=True)
    healthy = make_route(gateway, fake)
    name = f"combo-{failing.provider}"
    gateway.post(
        "/api/combos/",
        {
            "name": name,
            "targets": [
                {"provider": failing.provider, "model": "m"},
                {"provider": healthy.provider, "model": "m"},
            ],
        },
    )
    key = gateway.post("/api/keys/", {"name": name, "allowed_models": [name]})["key"]

    for _ in range(3):
        response = ask(gateway, key, name)
        assert response.status_code == 200
        assert f"provider={healthy.provider}" in response.headers["x-omniroute-decision"]
    assert len(records(fake, failing)) == 3  # c1 and c2, then c1 again: it opened
    assert "circuit_open" in response.headers["x-omniroute-decision"]
    assert len(records(fake, healthy)) == 3


def test_a_restart_keeps_an_open_breaker_open_with_the_same_retry_after(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    # Memory store on purpose: after the restart only the database remembers the breaker.
    env, manage_key = prepare_gateway(tmp_path, REDIS_URL="")
    with serving(env, manage_key) as first:
        slow = {"failureThreshold": 2, "degradationThreshold": 1, "resetTimeoutMs": 600_000}
        patch = {"providerBreaker": {"local": slow}, "attempts": NO_RETRIES}
        first.api.patch("/api/resilience", json=patch)
        route = make_route(first, fake, DOWN, DOWN, category="local", disable_cooling=True)
        ask(first, route.key, route.model())
        ask(first, route.key, route.model())
        before = breaker_of(first, route.provider)
        stopped_at = time.monotonic()
    assert before is not None and before["state"] == "open"
    with serving(env, manage_key) as second:
        after = breaker_of(second, route.provider)
        elapsed_ms = (time.monotonic() - stopped_at) * 1000
        refused = ask(second, route.key, route.model())
    assert after is not None and after["state"] == "open"
    assert (
        before["retryAfterMs"] - elapsed_ms - 2000
        <= after["retryAfterMs"]
        <= before["retryAfterMs"]
    )
    assert refused.json()["error"]["code"] == "provider_circuit_open"
    assert len(records(fake, route)) == 3
