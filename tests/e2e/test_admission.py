"""Admission through real HTTP.

(1) ``max_concurrent = 1``: twenty concurrent requests all succeed and the upstream never has
    more than one in flight on the connection (measured at the fake upstream from its records'
    ``[at, finished_at]``); the same load without the cap does overlap.
(2) The request queue of a protected connection: one request running, ``maxQueueDepth`` (2)
    waiting, the next caller is refused at once (429 ``RATE_LIMIT_QUEUE_FULL``) and never
    reaches the upstream; the others succeed.
(3) An upstream slower than ``maxWaitMs`` is a local 504 ``RATE_LIMIT_EXECUTION_TIMEOUT``
    (failed over like a timeout when there is another connection) that touches no connection
    state, no breaker and no lockout.
(4) A request waiting for its slot whose client closes its socket leaves the queue and never
    reaches the upstream.

The fake upstream runs in a thread of this process, so its records' ``at`` and
``finished_at`` are this process's ``time.monotonic()``. The ``requestQueue`` settings are the
whole gateway's: the ``request_queue`` fixture puts back what it changes. Only protected
connections (``rate_limit_protection``, created here) go through the request queue, so the
changes touch no other test's traffic meanwhile.

The harness's upstream read timeout is 1.5 s (``READ_TIMEOUT_SECONDS``): an upstream that
must answer keeps its latency under it (:data:`SLOW_MS`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import READ_TIMEOUT_SECONDS, Gateway, Route, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]
LOAD = 20  # = the semaphore queue (19 waiting behind one running): none refused
LOAD_LATENCY_MS = 100
SLOW_MS = 1000  # slow enough to queue behind, under the read timeout
FAST_QUEUE = {"minTimeBetweenRequestsMs": 0, "requestsPerMinute": 1_000_000}
CLIENT_TIMEOUT_SECONDS = 15.0
LOAD_BOUND_SECONDS = 30.0
WAIT_SECONDS = 5.0  # for the fake upstream to see what the gateway sent
QUEUED_WITHIN_SECONDS = 5.0  # for sent requests to show in the gateway's queue (health)
SETTLE_SECONDS = 0.3  # for sent requests to reach their queue in the gateway

assert SLOW_MS / 1000 < READ_TIMEOUT_SECONDS


# --- helpers ----------------------------------------------------------------------------------

Configure = Callable[..., dict[str, Any]]


@pytest.fixture
def request_queue(gateway: Gateway) -> Iterator[Configure]:
    """Change ``requestQueue`` settings for one test; everything put back after."""
    before = gateway.api.get("/api/resilience").json()["requestQueue"]

    def configure(**values: Any) -> dict[str, Any]:
        response = gateway.api.patch("/api/resilience", json={"requestQueue": values})
        assert response.status_code == 200, response.text
        return dict(response.json()["requestQueue"])

    try:
        yield configure
    finally:
        restored = gateway.api.patch("/api/resilience", json={"requestQueue": before})
        assert restored.status_code == 200, restored.text
        assert restored.json()["requestQueue"] == before


def body(route: Route) -> dict[str, Any]:
    return {"model": route.model(), "messages": MESSAGES}


def async_client(gateway: Gateway, route: Route) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{gateway.url}/v1",
        headers={"authorization": f"Bearer {route.key}"},
        timeout=CLIENT_TIMEOUT_SECONDS,
        limits=httpx.Limits(max_connections=LOAD + 5, max_keepalive_connections=LOAD + 5),
    )


async def ask(client: httpx.AsyncClient, route: Route) -> httpx.Response:
    return await client.post("/chat/completions", json=body(route))


async def timed_ask(client: httpx.AsyncClient, route: Route) -> tuple[httpx.Response, float]:
    """The response and when it came back (``time.monotonic()``)."""
    response = await ask(client, route)
    return response, time.monotonic()


async def load(gateway: Gateway, route: Route, count: int) -> list[httpx.Response]:
    """``count`` requests at once, each on its own connection to the gateway."""
    async with async_client(gateway, route) as client, asyncio.timeout(LOAD_BOUND_SECONDS):
        return await asyncio.gather(*(ask(client, route) for _ in range(count)))


def most_in_flight(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals open at one instant (one that ends where another starts: apart)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in events:  # at one instant, -1 sorts before +1
        current += step
        most = max(most, current)
    return most


def upstream_intervals(fake: FakeUpstream, route: Route) -> list[tuple[float, float]]:
    spans = []
    for record in records(fake, route):
        assert record.finished_at is not None, record
        spans.append((record.at, record.finished_at))
    return spans


async def finished(fake: FakeUpstream, route: Route, count: int) -> bool:
    """Whether the fake saw ``count`` requests from ``route``, each finished, within
    :data:`WAIT_SECONDS` (its journal is touched once an answer has gone out)."""

    def done(upstream: FakeUpstream) -> bool:
        seen = records(upstream, route)
        return len(seen) >= count and all(r.finished_at is not None for r in seen)

    return await fake.wait_for_async(done, WAIT_SECONDS)


async def arrived(fake: FakeUpstream, route: Route, count: int) -> bool:
    """Whether the fake saw ``count`` requests from ``route`` within :data:`WAIT_SECONDS`."""
    return await fake.wait_for_async(lambda f: len(records(f, route)) >= count, WAIT_SECONDS)


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


# --- (1) max_concurrent -----------------------------------------------------------------------


async def test_max_concurrent_1_keeps_one_request_in_flight_upstream_and_all_succeed(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    knobs = {"latency_ms": LOAD_LATENCY_MS}
    capped = make_route(gateway, fake, knobs, connection_fields=[{"max_concurrent": 1}])
    free = make_route(gateway, fake, knobs)

    capped_replies = await load(gateway, capped, LOAD)
    free_replies = await load(gateway, free, LOAD)
    assert await finished(fake, capped, LOAD) and await finished(fake, free, LOAD)

    assert [r.status_code for r in capped_replies] == [200] * LOAD, capped_replies[0].text
    assert [r.status_code for r in free_replies] == [200] * LOAD, free_replies[0].text
    capped_spans, free_spans = upstream_intervals(fake, capped), upstream_intervals(fake, free)
    assert len(capped_spans) == len(free_spans) == LOAD  # nothing retried
    assert most_in_flight(capped_spans) == 1
    assert most_in_flight(free_spans) > 1  # the measure can fail: the load does overlap


def test_most_in_flight_counts_overlap_and_treats_touching_intervals_as_apart() -> None:
    assert most_in_flight([]) == 0
    assert most_in_flight([(0, 1), (1, 2), (2, 3)]) == 1
    assert most_in_flight([(0, 2), (1, 3), (1.5, 1.6), (4, 5)]) == 3


# --- (2) the request queue's depth ------------------------------------------------------------


async def test_past_max_queue_depth_the_next_caller_is_refused_at_once_and_never_goes_up(
    gateway: Gateway, fake: FakeUpstream, request_queue: Configure
) -> None:
    request_queue(**FAST_QUEUE, concurrentRequests=1, maxQueueDepth=2)
    route = make_route(
        gateway, fake, {"latency_ms": SLOW_MS}, connection_fields=[{"rate_limit_protection": True}]
    )

    async with async_client(gateway, route) as client, asyncio.timeout(LOAD_BOUND_SECONDS):
        running = asyncio.create_task(ask(client, route))
        assert await arrived(fake, route, 1), "the first request never reached the upstream"
        waiting = [asyncio.create_task(ask(client, route)) for _ in range(2)]
        # both join the queue behind the running one (a fixed settle: the health payload,
        # cached for a second, is too coarse for the one-second window the upstream allows)
        await asyncio.sleep(SETTLE_SECONDS)
        sent_at = time.monotonic()
        refused, refused_at = await timed_ask(client, route)
        in_flight_then = records(fake, route)
        served = [await running, *await asyncio.gather(*waiting)]
    assert await finished(fake, route, 3)

    assert refused.status_code == 429, refused.text
    assert error_code(refused) == "RATE_LIMIT_QUEUE_FULL"
    assert "maxQueueDepth" in refused.json()["error"]["message"]
    # At once: while the first request was still upstream, well before its answer.
    assert len(in_flight_then) == 1 and in_flight_then[0].finished_at is None
    assert refused_at - sent_at < SLOW_MS / 1000
    assert [r.status_code for r in served] == [200, 200, 200]
    assert len(records(fake, route)) == 3  # the refused one never reached the upstream
    assert most_in_flight(upstream_intervals(fake, route)) == 1


# --- (3) the execution limit ------------------------------------------------------------------

MAX_WAIT_MS = 200
BEYOND_MAX_WAIT_MS = 1500  # slower than maxWaitMs (and than the read timeout: never answers)
REPEATS = 3


STATE_FIELDS = (
    "test_status",
    "rate_limited_until",
    "last_error",
    "last_error_at",
    "last_error_type",
    "error_code",
    "backoff_level",
    "cooldown_remaining_seconds",
)


def connection_state(gateway: Gateway, connection: int) -> dict[str, Any]:
    """What the gateway knows of a connection's health (``ERROR_FIELDS`` and its cooldown)."""
    shown = gateway.api.get(f"/api/connections/{connection}/").json()
    return {name: shown[name] for name in STATE_FIELDS}


def health_after(gateway: Gateway, moment: float, timeout: float = 5) -> dict[str, Any]:
    """The health payload built after ``moment`` (``time.time()``): health is cached 1 s."""
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = gateway.api.get("/api/monitoring/health").json()
        if dt.datetime.fromisoformat(health["timestamp"]).timestamp() > moment:
            return health
        assert time.monotonic() < deadline, "the health payload was never rebuilt"
        time.sleep(0.1)


def assert_breaker_untouched(gateway: Gateway, provider: str, moment: float) -> None:
    health = health_after(gateway, moment)
    breaker = next((b for b in health["providerBreakers"] if b["name"] == provider), None)
    assert breaker is None or (breaker["state"], breaker["failureCount"]) == ("closed", 0), breaker


def lockouts_of(gateway: Gateway, provider: str) -> list[dict[str, Any]]:
    items = gateway.api.get("/api/resilience/model-cooldowns").json()["items"]
    return [item for item in items if item["provider"] == provider]


async def test_an_upstream_slower_than_max_wait_is_a_local_504_that_charges_no_one(
    gateway: Gateway, fake: FakeUpstream, request_queue: Configure
) -> None:
    request_queue(**FAST_QUEUE, maxWaitMs=MAX_WAIT_MS)
    route = make_route(
        gateway,
        fake,
        {"latency_ms": BEYOND_MAX_WAIT_MS},
        connection_fields=[{"rate_limit_protection": True}],
    )
    (connection,) = route.connections
    before = connection_state(gateway, connection)

    # Several in a row: were they charged, the model would be locked by the third (three
    # consecutive failures), and the connection skipped ("excluded=") from then on.
    async with async_client(gateway, route) as client:
        for _ in range(REPEATS):
            sent_at = time.monotonic()
            reply, replied_at = await timed_ask(client, route)
            assert reply.status_code == 504, reply.text
            assert error_code(reply) == "RATE_LIMIT_EXECUTION_TIMEOUT"
            assert "excluded=" not in reply.headers["x-omniroute-decision"]
            # maxWaitMs ended it, not the upstream's answer
            assert replied_at - sent_at < BEYOND_MAX_WAIT_MS / 1000
    wall_clock_then = time.time()

    assert len(records(fake, route)) >= REPEATS  # each was dispatched: the limit is on execution
    # Request-scoped: the connection, the provider's breaker and the lockouts are untouched.
    assert_breaker_untouched(gateway, route.provider, wall_clock_then)
    assert connection_state(gateway, connection) == before
    assert before["test_status"] == "active" and before["cooldown_remaining_seconds"] == 0
    assert lockouts_of(gateway, route.provider) == []


async def test_the_execution_limit_fails_over_to_the_next_connection(
    gateway: Gateway, fake: FakeUpstream, request_queue: Configure
) -> None:
    request_queue(**FAST_QUEUE, maxWaitMs=MAX_WAIT_MS)
    route = make_route(
        gateway,
        fake,
        {"latency_ms": BEYOND_MAX_WAIT_MS},
        {},
        connection_fields=[{"rate_limit_protection": True}],
    )
    first, second = route.connections
    before = connection_state(gateway, first)

    async with async_client(gateway, route) as client:
        reply = await ask(client, route)

    assert reply.status_code == 200, reply.text
    assert f"connection={second}" in reply.headers["x-omniroute-decision"]
    assert (len(records(fake, route, 1)), len(records(fake, route, 2))) == (1, 1)
    assert connection_state(gateway, first) == before
    assert lockouts_of(gateway, route.provider) == []


# --- (4) a waiter whose client leaves ---------------------------------------------------------


async def queued_in_gateway(gateway: Gateway, section: str, key: str, count: int) -> None:
    """Wait until the gateway's health shows ``count`` requests queued on a gate or request
    queue (its ``admission`` section; the payload is cached for a second)."""
    name = "gate" if section == "gates" else "queue"
    async with asyncio.timeout(QUEUED_WITHIN_SECONDS):
        while True:
            response = await asyncio.to_thread(gateway.api.get, "/api/monitoring/health")
            health = response.json()
            items = health["admission"][section]
            if any(item[name] == key and item["queued"] == count for item in items):
                return
            await asyncio.sleep(0.1)


async def send_and_close(gateway: Gateway, route: Route, gate: str) -> bytes:
    """Send a chat request on a raw socket and close the socket once the gateway shows it
    waiting on ``gate``; what the gateway wrote back meanwhile (nothing, while it waits)."""
    address = urlsplit(gateway.url)
    assert address.hostname == "127.0.0.1" and address.port is not None
    payload = orjson.dumps(body(route))
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{address.port}\r\n"
        f"Authorization: Bearer {route.key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(head + payload)
        await writer.drain()
        answered = asyncio.ensure_future(reader.read(65536))
        await queued_in_gateway(gateway, "gates", gate, 1)
        if answered.done():
            return answered.result()
        answered.cancel()
        return b""
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_waiting_request_whose_client_leaves_never_reaches_the_upstream(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(
        gateway, fake, {"latency_ms": SLOW_MS}, connection_fields=[{"max_concurrent": 1}]
    )

    async with async_client(gateway, route) as client, asyncio.timeout(LOAD_BOUND_SECONDS):
        running = asyncio.create_task(ask(client, route))
        assert await arrived(fake, route, 1), "the first request never reached the upstream"
        gate = f"conn:{route.connections[0]}"
        answered_while_waiting = await send_and_close(gateway, route, gate)
        in_flight_then = records(fake, route)
        first = await running
        fresh = await ask(client, route)  # the slot is free again, and nobody is ahead
    assert await finished(fake, route, 2)

    assert answered_while_waiting == b""  # it was waiting when its client left
    assert len(in_flight_then) == 1 and in_flight_then[0].finished_at is None
    assert (first.status_code, fresh.status_code) == (200, 200), (first.text, fresh.text)
    assert len(records(fake, route)) == 2  # the one that left never went up
