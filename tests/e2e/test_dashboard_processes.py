"""Two gateway processes on one PostgreSQL database and one Redis: a breaker opened through
process A reaches a dashboard connected to process B, as an event from A over the Redis
channel layer and in B's next snapshot (read from the shared store), and so do A's requests.

The gateways get a PostgreSQL database and a Redis key prefix of their own, removed afterwards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, prepare_gateway, serving
from tests.e2e.dashboard_support import admin_session, create_admin, failing_route, open_breaker

pytestmark = pytest.mark.e2e

RECEIVE_SECONDS = 15


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
            # A's two refused requests reach B's traffic figures too (through the store).
            counted = _until(
                dashboard, lambda m: m["type"] == "snapshot" and m["traffic"]["errors"] >= 2
            )
            assert counted["traffic"]["requests"] >= 2 and not counted["traffic"]["idle"]
