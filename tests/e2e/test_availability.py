"""Availability first, through real HTTP.

(a) A model whose upstream keeps failing is locked alone, briefly, on its connection: the
    connection's other model serves throughout, a request for the locked model gets one panic
    attempt, and once the model heals it serves again as soon as the lock ends.
(b) In a combo of two models on one connection, a model answering 429 (with a hint) or 503 every
    time never refuses a request: the other model answers them all, and the connection is never
    cooled.
(c) An unknown model is the client's mistake: the upstream's 404 is returned, every time, and
    nothing is cooled, locked or counted.

The fake upstream fails one model at a time through its per-model knobs
(:meth:`FakeUpstream.set_model`); every model name is unique to its test. The gateway's clock
cannot be injected, so the one wait is a bounded poll for a lock of at most a second.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]
CAP_MS = 1000
RECOVERY_POLL_SECONDS = 5.0
SetModel = Callable[..., str]


def ask(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post("/chat/completions", json={"model": model, "messages": MESSAGES})


def settings_patch(gateway: Gateway, patch: dict[str, Any]) -> dict[str, Any]:
    response = gateway.api.patch("/api/resilience", json=patch)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def fast_recovery(gateway: Gateway) -> Iterator[dict[str, Any]]:
    """``availability``: three failures lock a pair, for one second (base = cap); restored
    after."""
    before = gateway.api.get("/api/resilience").json().get("availability")
    patch = {
        "consecutiveFailures": 3,
        "transientCooldownBaseMs": CAP_MS,
        "transientCooldownCapMs": CAP_MS,
    }
    yield settings_patch(gateway, {"availability": patch})["availability"]
    if before is not None:
        settings_patch(gateway, {"availability": before})


@pytest.fixture
def set_model(fake: FakeUpstream) -> Iterator[SetModel]:
    """Give a fresh model name knobs on the shared fake upstream; all forgotten after."""
    names: list[str] = []

    def apply(label: str, **knobs: object) -> str:
        name = f"{label}-{secrets.token_hex(4)}"
        fake.set_model(name, **knobs)
        names.append(name)
        return name

    yield apply
    for name in names:
        fake.set_model(name)


def locks_of(gateway: Gateway, route: Route, model: str) -> list[dict[str, Any]]:
    items = gateway.api.get("/api/resilience/model-cooldowns").json()["items"]
    return [i for i in items if (i["provider"], i["model"]) == (route.provider, model)]


def calls_for(fake: FakeUpstream, route: Route, model: str) -> int:
    return sum(1 for r in records(fake, route) if r.model == model)


def eventually(check: Callable[[], bool], timeout: float) -> bool:
    """Poll ``check`` every 0.1 s until it holds; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def assert_served(gateway: Gateway, key: str, route: Route, model: str) -> None:
    response = ask(gateway, key, route.model(model))
    assert response.status_code == 200, response.text
    assert response.json()["model"] == model
    assert f"connection={route.connections[0]}" in response.headers["x-omniroute-decision"]


def assert_never_cooled(gateway: Gateway, connection: int) -> None:
    state = gateway.api.get(f"/api/connections/{connection}/").json()
    assert state["test_status"] == "active", state
    assert state["rate_limited_until"] is None and state["cooldown_remaining_seconds"] == 0


# ------------------------------------------------------------------------------------ (a)


def test_a_failing_model_is_locked_alone_briefly_and_serves_again_once_healed(
    gateway: Gateway, fake: FakeUpstream, fast_recovery: dict[str, Any], set_model: SetModel
) -> None:
    route = make_route(gateway, fake)
    model_a, model_b = set_model("a", status=503), set_model("b")

    # given: A fails until its pair is locked (three transient failures at most), B serves
    locks: list[dict[str, Any]] = []
    for _ in range(fast_recovery["consecutiveFailures"]):
        assert ask(gateway, route.key, route.model(model_a)).status_code == 503
        locks = locks_of(gateway, route, model_a)
        assert_served(gateway, route.key, route, model_b)
        if locks:
            break
    assert len(locks) == 1, "A is not locked after three failing requests"
    assert locks[0]["connectionId"] == route.connections[0]
    assert 0 < locks[0]["remainingMs"] <= CAP_MS

    # when: A is asked while locked, it gets one panic attempt (the upstream still fails)
    tried = calls_for(fake, route, model_a)
    panic = ask(gateway, route.key, route.model(model_a))
    assert panic.status_code == 503
    assert panic.json()["error"]["code"] != "all_targets_cooling_down"
    assert "panic=1" in panic.headers["x-omniroute-decision"]
    assert calls_for(fake, route, model_a) == tried + 1
    assert_served(gateway, route.key, route, model_b)

    # then: A heals; once its (at most one second) lock ends, one request probes and is served
    fake.set_model(model_a)
    healed_at = time.monotonic()
    while any(lock["remainingMs"] > 0 for lock in locks_of(gateway, route, model_a)):
        assert time.monotonic() - healed_at < RECOVERY_POLL_SECONDS, "the lock never ended"
        assert_served(gateway, route.key, route, model_b)
        time.sleep(0.1)
    tried = calls_for(fake, route, model_a)
    probe = ask(gateway, route.key, route.model(model_a))
    assert probe.status_code == 200 and probe.json()["model"] == model_a
    assert "panic=1" not in probe.headers["x-omniroute-decision"]
    assert calls_for(fake, route, model_a) == tried + 1
    assert eventually(lambda: locks_of(gateway, route, model_a) == [], timeout=2)
    assert_served(gateway, route.key, route, model_a)
    assert_never_cooled(gateway, route.connections[0])


# ------------------------------------------------------------------------------------ (b)

FAILURES: dict[str, dict[str, Any]] = {
    "429 with Retry-After 2": {"status": 429, "retry_after": 2},
    "503": {"status": 503},
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_combo_model_failing_every_time_never_refuses_a_request(
    gateway: Gateway, fake: FakeUpstream, set_model: SetModel, failure: str
) -> None:
    route = make_route(gateway, fake)
    model_a, model_b = set_model("a", **FAILURES[failure]), set_model("b")
    combo = f"combo-{route.provider}"
    gateway.post(
        "/api/combos/",
        {
            "name": combo,
            "targets": [
                {"provider": route.provider, "model": model_a},
                {"provider": route.provider, "model": model_b},
            ],
        },
    )
    key = gateway.post("/api/keys/", {"name": combo, "allowed_models": [combo]})["key"]

    for _ in range(20):
        response = ask(gateway, key, combo)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == model_b
        assert f"connection={route.connections[0]}" in response.headers["x-omniroute-decision"]
        assert_never_cooled(gateway, route.connections[0])
    assert calls_for(fake, route, model_b) == 20
    assert 1 <= calls_for(fake, route, model_a) <= 5  # then its pair was locked, not retried


# ------------------------------------------------------------------------------------ (c)

NOT_FOUND_MESSAGE = "The model `{model}` does not exist or you do not have access to it."


def test_an_unknown_model_gets_the_upstreams_404_and_changes_nothing(
    gateway: Gateway, fake: FakeUpstream, set_model: SetModel
) -> None:
    # The model lockout always applies (its switch is retired) and its codes cannot list 404.
    route = make_route(gateway, fake)
    unknown = set_model("no-such-model")
    error = {
        "message": NOT_FOUND_MESSAGE.format(model=unknown),
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
    fake.set_model(unknown, status=404, body=orjson.dumps({"error": error}).decode())
    real = set_model("real")
    other = {"name": f"{route.provider}-other", "allowed_models": [f"{route.provider}/*"]}
    other_key = gateway.post("/api/keys/", other)["key"]

    for attempt in range(1, 6):
        response = ask(gateway, route.key, route.model(unknown))
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "model_not_found"
        assert calls_for(fake, route, unknown) == attempt  # every time asked upstream, once
        assert_served(gateway, other_key, route, real)
        assert locks_of(gateway, route, unknown) == []
        assert_never_cooled(gateway, route.connections[0])
    health = gateway.api.get("/api/monitoring/health").json()
    breaker = next((b for b in health["providerBreakers"] if b["name"] == route.provider), None)
    assert breaker is None or (breaker["state"], breaker["failureCount"]) == ("closed", 0)
