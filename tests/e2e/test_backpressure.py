"""A client that stops reading a stream stops the gateway reading the upstream (back-pressure),
under daphne and under uvicorn.

Without it the gateway reads the upstream at full speed and buffers whatever the client has
not taken yet, so one slow reader can hold a whole answer in the gateway's memory.
"""

from __future__ import annotations

import hashlib
import itertools
import socket
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.e2e.conftest import (
    READ_TIMEOUT_SECONDS,
    Gateway,
    Route,
    make_route,
    prepare_gateway,
    records,
    serving,
)

pytestmark = pytest.mark.e2e

CHUNKS = 20_000
CHUNK_SIZE = 3_000  # ~63 MB of events: far more than all the buffers on the way hold (~10 MB)
# Any interval above 0 makes the fake write (and count) one event at a time.
KNOBS = {"chunks": CHUNKS, "chunk_size": CHUNK_SIZE, "chunk_interval_ms": 0.001}
CLIENT_RECEIVE_BUFFER = 64 * 1024
SETTLED_S = 0.5  # the upstream's progress stands still this long: it is being held back
# The pause outlasts the gateway's upstream read timeout: a held-back upstream is not a stall.
PAUSE_MIN_S = READ_TIMEOUT_SECONDS + 0.5
PAUSE_MAX_S = 8.0


@pytest.fixture(scope="module", params=["daphne", "uvicorn"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """A gateway under each server."""
    env, manage_key = prepare_gateway(tmp_path_factory.mktemp(f"backpressure-{request.param}"))
    with serving(env, manage_key, "--server", request.param) as running:
        yield running


def _sent(fake: FakeUpstream, route: Route) -> int:
    (record,) = records(fake, route)
    return int(record.chunks_sent)


def _pause(fake: FakeUpstream, route: Route) -> int:
    """Upstream chunks sent, once their count stopped growing (or all of them were sent) and
    at least ``PAUSE_MIN_S`` passed; at most ``PAUSE_MAX_S``."""
    start = time.monotonic()
    last, since = -1, start
    while (now := time.monotonic()) < start + PAUSE_MAX_S:
        sent = _sent(fake, route)
        if sent >= CHUNKS:
            return sent
        if sent != last:
            last, since = sent, now
        elif now - since >= SETTLED_S and now - start >= PAUSE_MIN_S:
            return sent
        time.sleep(0.05)
    return _sent(fake, route)


def _digest_of_content(lines: Iterator[str]) -> tuple[str, str]:
    """The SHA-256 of the streamed content (the answer is too big to keep twice), and the
    last line."""
    digest, last = hashlib.sha256(), ""
    for line in lines:
        if line.startswith("data: {"):
            for choice in orjson.loads(line[6:])["choices"]:
                digest.update((choice["delta"].get("content") or "").encode())
        last = line or last
    return digest.hexdigest(), last


def test_a_client_that_stops_reading_holds_the_upstream_back(
    served: Gateway, fake: FakeUpstream
) -> None:
    gateway = served
    route = make_route(gateway, fake, KNOBS)
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    # A small, fixed receive buffer: the kernel cannot soak up megabytes on the client's behalf.
    small = [(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RECEIVE_BUFFER)]
    transport = httpx.HTTPTransport(socket_options=small)
    headers = {"authorization": f"Bearer {route.key}"}
    with (
        httpx.Client(base_url=f"{gateway.url}/v1", transport=transport, timeout=10) as client,
        client.stream("POST", "/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        first = next(lines)
        assert first.startswith("data: {")
        # The client stops reading: the upstream may only fill the buffers on the way.
        sent = _pause(fake, route)
        assert sent < CHUNKS // 2, f"the upstream pushed {sent} of {CHUNKS} chunks meanwhile"
        # Then it reads the rest: the answer arrives whole.
        digest, last = _digest_of_content(itertools.chain([first], lines))
    expected = hashlib.sha256(content(CHUNKS * CHUNK_SIZE).encode()).hexdigest()
    assert (digest, last) == (expected, "data: [DONE]")
    assert _sent(fake, route) == CHUNKS
