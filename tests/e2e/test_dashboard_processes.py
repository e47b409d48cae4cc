"""Two gateway processes on one PostgreSQL database and one Redis: a breaker opened through
process A reaches a dashboard connected to process B, as an event from A over the Redis
channel layer and in B's next snapshot (read from the shared store).

The test makes its own PostgreSQL database and Redis key prefix and removes both afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from websockets.sync.client import ClientConnection, connect

from routing.fakeupstream import FakeUpstream
from tests.conftest import require_service
from tests.e2e.conftest import Gateway, prepare_gateway, serving
from tests.e2e.dashboard_support import admin_session, create_admin, failing_route, open_breaker

pytestmark = pytest.mark.e2e

POSTGRES = os.environ.get("CI_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("CI_REDIS_URL", "redis://127.0.0.1:6379/15")
RECEIVE_SECONDS = 15


@pytest.fixture
def shared_services() -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database and Redis prefix, dropped and deleted afterwards."""
    name = f"omniroute_dash_{secrets.token_hex(6)}"
    admin_url = POSTGRES.replace("postgres://", "postgresql://", 1)
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        store = redis.Redis.from_url(REDIS, socket_connect_timeout=3)
        store.ping()
    except (psycopg.Error, redis.RedisError) as error:
        require_service("PostgreSQL and Redis", error)
    prefix = f"omniroute-dash-{secrets.token_hex(6)}:"
    try:
        yield {"DATABASE_URL": urlunsplit(urlsplit(POSTGRES)._replace(path=f"/{name}")),
               "REDIS_URL": REDIS, "OMNIROUTE_REDIS_PREFIX": prefix}  # fmt: skip
    finally:
        for key in store.scan_iter(match=f"{prefix}*", count=500):
            store.delete(key)
        store.close()
        with psycopg.connect(admin_url, autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
