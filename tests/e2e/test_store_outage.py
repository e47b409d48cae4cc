"""A Redis outage through real HTTP: the gateway keeps answering.

This test runs its own ``redis-server`` and its own gateway pointed at it, kills the server
while requests are flowing, checks that every request still succeeds and that health says
``degraded`` (readiness stays green), then restarts the server on the same port and waits
(bounded) until the gateway shares its state through Redis again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, serving
from tests.redis_server import RedisServer, running_redis

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]
REQUESTS = 20
KILL_AFTER = 5
WORKERS = 4
RECOVERY_SECONDS = 10.0
RESTORE_MARKER = "r:housekeeping:restored"  # written by the gateway when Redis comes back


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
def outage_gateway(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[Gateway, str]]:
    """A gateway of its own on ``redis_server``, and its Redis key prefix."""
    env, manage_key = prepare_gateway(tmp_path, REDIS_URL=redis_server.url)
    with serving(env, manage_key) as gateway:
        yield gateway, env["OMNIROUTE_REDIS_PREFIX"]


def _health(gateway: Gateway) -> dict[str, Any]:
    response = gateway.api.get("/api/monitoring/health")
    assert response.status_code == 200, response.text
    return dict(response.json())


def _send_while_killing(client: httpx.Client, model: str, server: RedisServer) -> list[int]:
    """``REQUESTS`` requests from ``WORKERS`` threads; the server dies after ``KILL_AFTER``."""
    done, lock = [0], threading.Lock()

    def one(_: int) -> int:
        status = client.post("/chat/completions", json={"model": model, "messages": MESSAGES})
        with lock:
            done[0] += 1
            if done[0] == KILL_AFTER:
                server.kill()
        return status.status_code

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(one, range(REQUESTS)))


def test_a_redis_outage_never_fails_a_request(
    outage_gateway: tuple[Gateway, str], fake: FakeUpstream, redis_server: RedisServer
) -> None:
    gateway, prefix = outage_gateway
    route = make_route(gateway, fake)
    assert _health(gateway)["store"] == {
        "backend": "redis",
        "degraded": False,
        "reason": None,
        "since": None,
    }

    with gateway.client(route.key) as client:
        # when: Redis dies under load
        statuses = _send_while_killing(client, route.model(), redis_server)

        # then: every request was served, health is degraded, readiness is not affected
        assert statuses == [200] * REQUESTS
        degraded = _health(gateway)
        assert degraded["status"] == "degraded" and degraded["store"]["degraded"] is True
        assert degraded["reason"].startswith("state store unreachable")
        anonymous = httpx.get(f"{gateway.url}/api/monitoring/health", timeout=10)
        assert anonymous.json() == {"status": "degraded"}
        assert httpx.get(f"{gateway.url}/readyz", timeout=10).status_code == 200
        ask = {"model": route.model(), "messages": MESSAGES}
        assert client.post("/chat/completions", json=ask).status_code == 200

        # when: Redis comes back (empty) on the same port
        redis_server.start()
        deadline = time.monotonic() + RECOVERY_SECONDS
        while _health(gateway)["store"]["degraded"]:
            assert time.monotonic() < deadline, "the gateway did not reconnect to Redis"
            assert client.post("/chat/completions", json=ask).status_code == 200
            time.sleep(0.2)

    # then: the gateway writes to the shared Redis again (its recovery restore left a marker).
    recovered = _health(gateway)
    assert recovered["store"]["degraded"] is False and "reason" not in recovered
    shared = redis.Redis.from_url(redis_server.url)
    try:
        assert shared.exists(f"{prefix}{RESTORE_MARKER}") == 1
    finally:
        shared.close()
