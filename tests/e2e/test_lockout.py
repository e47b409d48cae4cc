"""Pair locks (model lockouts) through real HTTP: one failing model never takes its connection
down, and an upstream-hinted lock is never overridden by panic."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]


def ask(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post("/chat/completions", json={"model": model, "messages": MESSAGES})


def locks_of(gateway: Gateway, provider: str) -> list[dict[str, Any]]:
    items = gateway.api.get("/api/resilience/model-cooldowns").json()["items"]
    return [item for item in items if item["provider"] == provider]


def test_a_locked_model_leaves_its_connection_serving_the_others(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    model_a, model_b = route.model("model-a"), route.model("model-b")

    fake.script({"status": 429, "retry_after": 30})
    assert ask(gateway, route.key, model_a).status_code == 429
    (lock,) = locks_of(gateway, route.provider)
    assert (lock["model"], lock["connectionId"]) == ("model-a", route.connections[0])
    assert (lock["timerClass"], lock["remainingMs"] > 25_000) == ("upstream_hinted", True)

    refused = ask(gateway, route.key, model_a)  # locked: never reaches the upstream
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "all_targets_cooling_down"
    assert "model_lockout" in refused.headers["x-omniroute-decision"]
    assert "panic" not in refused.headers["x-omniroute-decision"]
    assert [r.body["model"] for r in records(fake, route)] == ["model-a"]

    served = ask(gateway, route.key, model_b)  # the same connection keeps serving B
    assert served.status_code == 200
    assert f"connection={route.connections[0]}" in served.headers["x-omniroute-decision"]

    unlock = {"provider": route.provider, "model": "model-a"}
    assert gateway.api.request("DELETE", "/api/resilience/model-cooldowns", json=unlock).is_success
    assert locks_of(gateway, route.provider) == []
    assert ask(gateway, route.key, model_a).status_code == 200  # routable again at once


def test_an_unknown_model_locks_nothing(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)

    fake.script({"status": 404}, {"status": 404})
    assert ask(gateway, route.key, route.model("nope")).status_code == 404
    assert ask(gateway, route.key, route.model("nope")).status_code == 404

    assert locks_of(gateway, route.provider) == []
    assert ask(gateway, route.key, route.model("real")).status_code == 200
