"""Two gateway processes on one PostgreSQL database and one Redis: the request queue of a
connection limited to :data:`RPM` requests a minute lets at most that many reach the upstream
in the minute, whichever process the requests come through (the limiter's window and spacing
are shared through the store: ``docs/routing.md``, admission).

More than the limit is sent, half through each gateway, at once. The requests past the limit
wait in the queues until their clients give up (:data:`CLIENT_TIMEOUT_SECONDS`), well within
the minute; a waiter whose client left never reaches the upstream. The fake upstream counts
what arrived.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, prepare_gateway, records, serving

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.redis]

RPM = 10
PER_GATEWAY = RPM  # twice the limit in all: each process alone would let its share through
MIN_TIME_MS = 100
# The limit's requests start MIN_TIME_MS apart: a generous bound for all of them to answer;
# the rest wait past it and are given up.
CLIENT_TIMEOUT_SECONDS = max(10.0, 10 * RPM * MIN_TIME_MS / 1000)
WAIT_SECONDS = 15.0


def knows_route(gateway: Gateway, route: Route) -> bool:
    """Whether ``gateway`` already serves ``route`` (its configuration comes from the shared
    database, which another process wrote); asks no upstream."""
    with gateway.client(route.key) as client:
        listed = client.get("/models")
    return listed.status_code == 200 and route.model() in {m["id"] for m in listed.json()["data"]}


def until(condition: Any, bound: float = WAIT_SECONDS) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def queued(gateway: Gateway, route: Route) -> int:
    """Requests waiting in ``gateway``'s queue of the route's connection."""
    health = gateway.api.get("/api/monitoring/health").json()
    key = f"{route.provider}:{route.connections[0]}"
    return sum(q["queued"] for q in health["admission"]["queues"] if q["queue"] == key)


async def send(gateway: Gateway, route: Route, count: int) -> list[httpx.Response | BaseException]:
    payload = {"model": route.model(), "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(
        base_url=f"{gateway.url}/v1",
        headers={"authorization": f"Bearer {route.key}"},
        timeout=CLIENT_TIMEOUT_SECONDS,
        limits=httpx.Limits(max_connections=count + 1),
    ) as client:
        asks = (client.post("/chat/completions", json=payload) for _ in range(count))
        return list(await asyncio.gather(*asks, return_exceptions=True))


async def test_a_connection_limited_per_minute_is_limited_across_two_gateways(
    tmp_path: Path, fake: FakeUpstream, shared_services: dict[str, str]
) -> None:
    env, manage_key = prepare_gateway(tmp_path, **shared_services)
    with serving(env, manage_key) as a, serving(env, manage_key) as b:
        health = a.api.get("/api/monitoring/health").json()
        assert health["store"]["backend"] == "redis", health["store"]
        route = make_route(
            a,
            fake,
            {},
            served_models=["gpt-test"],
            connection_fields=[
                {
                    "rate_limit_protection": True,
                    "rate_limit_overrides": {"rpm": RPM, "minTime": MIN_TIME_MS},
                }
            ],
        )
        assert until(lambda: knows_route(b, route))
        started = time.monotonic()

        replies = await asyncio.gather(send(a, route, PER_GATEWAY), send(b, route, PER_GATEWAY))

        assert until(lambda: queued(a, route) == queued(b, route) == 0)
        answered = [r for r in replies[0] + replies[1] if isinstance(r, httpx.Response)]
        arrived = records(fake, route)
        assert time.monotonic() - started < 60  # all of it within one minute
        assert len(arrived) <= RPM
        assert len(arrived) == len([r for r in answered if r.status_code == 200]) == RPM
