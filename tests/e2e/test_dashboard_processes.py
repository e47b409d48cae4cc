"""Two gateway processes on one PostgreSQL database and one Redis: a breaker opened through
process A reaches a dashboard connected to process B, as an event from A over the Redis
channel layer and in B's next snapshot (read from the shared store).

The gateways get a PostgreSQL database and a Redis key prefix of their own, removed afterwards.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from websockets.sync.client import ClientConnection, connect

from routing.fakeupstream import FakeUpstream
from tests.conftest import require_service
from tests.databases import delete_keys, redis_prefix, run_key_patterns
from tests.e2e.conftest import Gateway, prepare_gateway, serving
from tests.e2e.dashboard_support import admin_session, create_admin, failing_route, open_breaker

pytestmark = pytest.mark.e2e

POSTGRES = os.environ.get("CI_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("CI_REDIS_URL", "redis://127.0.0.1:6379/15")
RECEIVE_SECONDS = 15


@pytest.fixture
def shared_services() -> Iterator[dict[str, str]]:
    """PostgreSQL (``prepare_gateway`` makes the gateways' own database on it) and Redis under
    a prefix of this test's, whose keys are deleted afterwards."""
    store = redis.Redis.from_url(REDIS, socket_connect_timeout=3)
    try:
        store.ping()
    except redis.RedisError as error:
        require_service("Redis", error)
    prefix = redis_prefix("dash")
    try:
        yield {"DATABASE_URL": POSTGRES, "REDIS_URL": REDIS, "OMNIROUTE_REDIS_PREFIX": prefix}
    finally:
        delete_keys(REDIS, run_key_patterns(prefix))
        store.close()


def _socket(gateway: Gateway, session: str) -> ClientConnection:
    url = gateway.url.replace("http://", "ws://") + "/ws/dashboard/"
    headers = {"Cookie": f"sessionid={session}", "Origin": gateway.url}
    return connect(url, additional_headers=headers, open_timeout=RECEIVE_SECONDS)


def _until(socket: ClientConnection, wanted: Any) -> dict[str, Any]:
    """The first message ``wanted`` accepts, within ``RECEIVE_SECONDS``."""
    deadline = time.monotonic() + RECEIVE_SECONDS
    while True:
        message: dict[str, Any] = json.loads(socket.recv(timeout=deadline - time.monotonic()))
        if wanted(message):
            return message


def test_a_breaker_opened_through_one_process_reaches_a_dashboard_on_another(
    tmp_path: Path, fake: FakeUpstream, shared_services: dict[str, str]
) -> None:
    env, manage_key = prepare_gateway(tmp_path, **shared_services)
    create_admin(env)
    with serving(env, manage_key) as a, serving(env, manage_key) as b:
        route = failing_route(a, fake)
        with _socket(b, admin_session(b)) as dashboard:
            first = _until(dashboard, lambda m: m["type"] == "snapshot")
            assert first["store"]["backend"] == "redis"
            assert route.provider not in {breaker["name"] for breaker in first["breakers"]}

            open_breaker(a, route)

            event = _until(
                dashboard,
                lambda m: (
                    m["type"] == "event" and m["kind"] == "breaker" and m["detail"]["to"] == "open"
                ),
            )
            assert (event["subject"], event["summary"]) == (route.provider, "degraded -> open")
            assert event["process"].endswith(f":{a.pid}")  # published by A, not B
            shown = _until(
                dashboard,
                lambda m: (
                    m["type"] == "snapshot"
                    and any(br["name"] == route.provider for br in m["breakers"])
                ),
            )
            states = {breaker["name"]: breaker["state"] for breaker in shown["breakers"]}
            assert states[route.provider] == "open"
