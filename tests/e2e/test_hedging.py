"""Hedging a slow first token over real HTTP: a real gateway process
and the fake upstream.

The slow first target sends its head and then only ``: ping`` comments (``stall=before`` with
``heartbeat_ms``), so bytes keep arriving within the e2e idle limit (1.5 s) and only a first
token is missing; or it holds its head back (``latency_ms``) with the idle limit raised for
the test.
"""

from __future__ import annotations

import time

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, records
from tests.e2e.stream_support import resilience, sse_text

pytestmark = pytest.mark.e2e

PINGING = {"stall": "before", "heartbeat_ms": 300}  # a head, pings, never a token
HEALTHY = {"chunks": 4, "chunk_size": 8, "text": "alt"}  # "Pack my box..."


def stream(gateway: Gateway, route: Route) -> tuple[httpx.Response, str, float]:
    """A streamed chat request: the response, its text and how long it took."""
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    started = time.monotonic()
    with gateway.client(route.key, timeout=60) as client:
        response = client.post("/chat/completions", json=body)
    elapsed = time.monotonic() - started
    return response, sse_text(response), elapsed


def decision(response: httpx.Response) -> dict[str, str]:
    parts = response.headers["x-omniroute-decision"].split("; ")
    return dict(part.split("=", 1) for part in parts)


def test_a_slow_first_token_is_hedged_on_the_defaults(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, PINGING, HEALTHY)

    response, text, elapsed = stream(gateway, route)

    assert response.status_code == 200 and text.startswith("Pack my box")
    assert elapsed < 12  # hedged after hedgeAfterMs (10 s), not after the 60 s limit
    told = decision(response)
    assert told["hedge"] == "1" and told["connection"] == str(route.connections[1])
    # The fake hands out copies of its records: wait on a fresh one each time.
    fake.wait_for(lambda f: records(f, route, 1)[0].disconnected_at is not None, timeout=15)
    (first,) = records(fake, route, 1)
    assert first.disconnected_at is not None  # the loser's upstream request was cancelled
    assert first.chunks_sent == 0
    (hedge,) = records(fake, route, 2)
    assert hedge.at - first.at >= 9.5  # started beside it after the delay


def test_with_hedging_off_the_request_waits_for_the_first_target(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # The first target's head comes at 3.5 s: the idle limit is raised above it for the test,
    # and the hedge delay lowered to 1 s so that hedging, when on, shows within the test.
    route = make_route(gateway, fake, {"latency_ms": 3_500}, HEALTHY)
    attempts = {"hedgeAfterMs": 1_000, "streamIdleMs": 10_000}

    with resilience(gateway, {"attempts": {**attempts, "hedgeEnabled": False}}):
        off, off_text, off_elapsed = stream(gateway, route)
    with resilience(gateway, {"attempts": attempts}):
        on, on_text, on_elapsed = stream(gateway, route)

    assert off.status_code == 200 and off_text.startswith("The quick")  # the first target's
    assert "hedge" not in decision(off) and off_elapsed >= 3.4
    assert decision(off)["connection"] == str(route.connections[0])
    assert len(records(fake, route, 2)) == 1  # only the hedge of the second request
    assert on.status_code == 200 and on_text.startswith("Pack my box")
    assert decision(on)["hedge"] == "1" and on_elapsed < 3.0


def test_after_twenty_fast_first_tokens_the_hedge_comes_at_the_learned_two_seconds(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, {"chunks": 2}, HEALTHY)
    for _ in range(20):
        response, _, _ = stream(gateway, route)
        assert response.status_code == 200 and "hedge" not in decision(response)
    fake.script(PINGING)  # the next answer request: the first target's

    response, text, elapsed = stream(gateway, route)

    assert response.status_code == 200 and text.startswith("Pack my box")
    assert decision(response)["hedge"] == "1"
    assert 1.9 <= elapsed < 5  # three times a fast p95 is below the 2 s floor: 2 s, not 10 s
    first = records(fake, route, 1)[-1]
    (hedge,) = records(fake, route, 2)
    assert 1.9 <= hedge.at - first.at < 3
