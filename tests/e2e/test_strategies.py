"""Combo strategies that spread load, measured through a real gateway process and the fake
upstream over HTTP on 127.0.0.1 (1 000 requests each, concurrency 1): weighted 1:1:2 within 5
percentage points, round-robin exact, least-used and p2c never more than one request apart, and
p2c sending a target five times slower clearly less.
Every answer names the model that answered, not the combo."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route

pytestmark = pytest.mark.e2e

REQUESTS = 1000
FAST = {"chunk_size": 8, "chunks": 1}


def combo_route(
    gateway: Gateway, fake: FakeUpstream, strategy: str, weights: tuple[int, ...] = (1, 1, 1)
) -> tuple[Route, str, str]:
    """Three connections of a fresh provider in a combo of ``strategy``; and a key for it."""
    route = make_route(gateway, fake, FAST, FAST, FAST)
    combo = f"{strategy}-{route.provider}"
    targets = [
        {"provider": route.provider, "model": "m", "connection": cid, "weight": weight}
        for cid, weight in zip(route.connections, weights, strict=True)
    ]
    gateway.post("/api/combos/", {"name": combo, "strategy": strategy, "targets": targets})
    key = gateway.post("/api/keys/", {"name": combo, "allowed_models": [combo]})["key"]
    return route, combo, key


def serve(gateway: Gateway, key: str, combo: str, requests: int = REQUESTS) -> list[int]:
    """The connection that answered each of ``requests`` requests, one after another."""
    body: dict[str, Any] = {"model": combo, "messages": [{"role": "user", "content": "x"}]}
    answered = []
    with httpx.Client(
        base_url=f"{gateway.url}/v1", headers={"authorization": f"Bearer {key}"}, timeout=10
    ) as client:
        for _ in range(requests):
            response = client.post("/chat/completions", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["model"] == "m"  # the answering model, never the combo
            decision = dict(
                part.split("=", 1) for part in response.headers["x-omniroute-decision"].split("; ")
            )
            answered.append(int(decision["connection"]))
    return answered


def test_weighted_1_1_2_over_1000_requests(gateway: Gateway, fake: FakeUpstream) -> None:
    route, combo, key = combo_route(gateway, fake, "weighted", (1, 1, 2))

    counts = Counter(serve(gateway, key, combo))

    for cid, share in zip(route.connections, (0.25, 0.25, 0.5), strict=True):
        assert abs(counts[cid] / REQUESTS - share) <= 0.05, counts


def test_round_robin_is_exact(gateway: Gateway, fake: FakeUpstream) -> None:
    route, combo, key = combo_route(gateway, fake, "round-robin")

    answered = serve(gateway, key, combo)

    first = route.connections.index(answered[0])
    rotation = route.connections[first:] + route.connections[:first]
    assert answered == (rotation * (REQUESTS // 3 + 1))[:REQUESTS]


@pytest.mark.parametrize("strategy", ["least-used", "p2c"])
def test_least_used_and_p2c_never_let_a_target_fall_two_behind(
    gateway: Gateway, fake: FakeUpstream, strategy: str
) -> None:
    route, combo, key = combo_route(gateway, fake, strategy)

    answered = serve(gateway, key, combo)

    running: Counter[int] = Counter()
    for cid in answered:
        running[cid] += 1
        assert max(running.values()) - min(running[c] for c in route.connections) <= 1


def test_p2c_sends_a_target_five_times_slower_clearly_less(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    fast, slow = {**FAST, "latency_ms": 30}, {**FAST, "latency_ms": 150}
    route = make_route(gateway, fake, fast, fast, slow)
    combo, ids = f"p2c-slow-{route.provider}", route.connections
    targets = [{"provider": route.provider, "model": "m", "connection": c} for c in ids]
    gateway.post("/api/combos/", {"name": combo, "strategy": "p2c", "targets": targets})
    key = gateway.post("/api/keys/", {"name": combo, "allowed_models": [combo]})["key"]

    counts = Counter(serve(gateway, key, combo, requests=200))

    # the slow one is measured (5 requests), then loses every pair it is drawn into; the fast
    # two share the rest by the first pick's draw
    assert counts[route.connections[2]] <= 20, counts
    assert min(counts[route.connections[0]], counts[route.connections[1]]) >= 70, counts
