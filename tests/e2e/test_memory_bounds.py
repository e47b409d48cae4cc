"""Memory bounds of a real gateway process: a 200 MB upstream body, and a client that reads
slowly.

The relay must stream, never buffer. Relaying an answer of any size grows the gateway's resident
memory (its peak, ``VmHWM``, against its size before) by less than ``RSS_GROWTH_BOUND_MIB``; a
client that reads slowly holds the upstream back, so what the upstream has sent and the client
has not read stays within what the socket buffers on the way hold, well under the half of the
stream that ``IN_FLIGHT_BOUND_BYTES`` allows.
A plain (non-stream) answer is checked whole before it is relayed, so one is held only up to
``MAX_UPSTREAM_BODY_BYTES`` (32 MiB): a 200 MB one is refused unread, by its length.
The gateway is a ``manage.py serve`` process of this module's own, so its memory is these
tests' alone; the upstream is the in-process fake, which builds a long stream as it writes it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.loadgen import (
    manage,
    process_peak_rss_mib,
    process_rss_mib,
    reset_peak_rss,
    spawned,
)
from tests.conftest import free_port
from tests.e2e.conftest import Gateway, Route, make_route, prepare_gateway, records

pytestmark = [pytest.mark.e2e, pytest.mark.reliability]

RSS_GROWTH_BOUND_MIB = 64.0
CHUNK_SIZE = 100_000
# Any interval above 0 makes the fake write one event at a time (and count them).
BIG = {"chunks": 2000, "chunk_size": CHUNK_SIZE, "chunk_interval_ms": 0.001}  # 200 MB of text
SLOW = {"chunks": 400, "chunk_size": CHUNK_SIZE, "chunk_interval_ms": 0.001}  # 40 MB of text
WARM = {"chunks": 20, "chunk_size": CHUNK_SIZE, "chunk_interval_ms": 0.001}
# The upstream sends the slow stream (40 MB) in about a second, ten times what the client reads
# in that time: a relay that buffered would let it run ahead by most of the stream. One that
# holds it back leaves only what the kernel's socket buffers on the way hold: about 10 MB on
# loopback, more on a loaded machine, where the kernel grows them (its receive maximum here is
# 32 MB). The bound is half the stream, so it is derived from the stream, not from a run.
IN_FLIGHT_BOUND_BYTES = SLOW["chunks"] * CHUNK_SIZE // 2
CLIENT_RECEIVE_BUFFER = 64 * 1024
READ_BYTES = 128 * 1024
SLOW_PAUSE_S = 0.02  # per read: about 6 MB/s, a tenth of what the relay can do here
END = b"data: [DONE]\n\n"


@dataclass
class Measured:
    """The gateway under measurement and its process id."""

    gateway: Gateway
    pid: int

    def baseline_mib(self) -> float:
        """The resident size now; the peak starts again from it."""
        reset_peak_rss(self.pid)
        return process_rss_mib(self.pid)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Iterator[Measured]:
    data_dir = tmp_path_factory.mktemp("memory-bounds")
    env, manage_key = prepare_gateway(data_dir)
    port = free_port()
    argv = manage("serve", "--port", str(port), "--no-collectstatic")
    with spawned(argv, env, port, log=Path(data_dir) / "gateway.log") as process:
        gateway = Gateway(f"http://127.0.0.1:{port}", manage_key)
        received, tail = read_stream(gateway, make_route(gateway, fake, WARM))  # warm-up
        assert received > 20 * CHUNK_SIZE and tail.endswith(END)
        yield Measured(gateway, process.pid)


def read_stream(
    gateway: Gateway, route: Route, pace: Callable[[int], None] = lambda _: None
) -> tuple[int, bytes]:
    """Stream an answer through a small receive buffer, calling ``pace`` with the bytes read so
    far after each read; the bytes read and the last of them."""
    body: dict[str, Any] = {
        "model": route.model(),
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    small = [(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RECEIVE_BUFFER)]
    transport = httpx.HTTPTransport(socket_options=small)
    headers = {"authorization": f"Bearer {route.key}"}
    received, tail = 0, b""
    with (
        httpx.Client(base_url=f"{gateway.url}/v1", transport=transport, timeout=30) as client,
        client.stream("POST", "/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        for part in response.iter_raw(READ_BYTES):
            received += len(part)
            tail = (tail + part)[-len(END) :]
            pace(received)
    return received, tail


def test_a_200_mb_stream_passes_through_without_growing_the_gateway(
    measured: Measured, fake: FakeUpstream
) -> None:
    route = make_route(measured.gateway, fake, BIG)
    before = measured.baseline_mib()

    received, tail = read_stream(measured.gateway, route)

    growth = process_peak_rss_mib(measured.pid) - before
    assert received > 200_000_000 and tail == END  # the whole answer, ended
    assert growth < RSS_GROWTH_BOUND_MIB, f"the gateway grew by {growth:.1f} MiB"


def test_a_200_mb_plain_answer_is_refused_unread(measured: Measured, fake: FakeUpstream) -> None:
    route = make_route(measured.gateway, fake, {"chunks": 2000, "chunk_size": CHUNK_SIZE})
    before = measured.baseline_mib()
    body = {"model": route.model(), "messages": [{"role": "user", "content": "x"}]}

    with measured.gateway.client(route.key, timeout=30) as client:
        response = client.post("/chat/completions", json=body)

    growth = process_peak_rss_mib(measured.pid) - before
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_response_too_large"
    assert growth < RSS_GROWTH_BOUND_MIB, f"the gateway grew by {growth:.1f} MiB"


def test_a_slow_reader_holds_the_upstream_back_and_the_gateway_does_not_grow(
    measured: Measured, fake: FakeUpstream
) -> None:
    route = make_route(measured.gateway, fake, SLOW)
    before = measured.baseline_mib()
    ahead = [0]  # the most the upstream was ever ahead of the client, in bytes

    def slowly(received: int) -> None:
        (record,) = records(fake, route)
        ahead[0] = max(ahead[0], record.chunks_sent * CHUNK_SIZE - received)
        time.sleep(SLOW_PAUSE_S)

    received, tail = read_stream(measured.gateway, route, slowly)

    growth = process_peak_rss_mib(measured.pid) - before
    assert received > 40_000_000 and tail == END
    assert 0 < ahead[0] < IN_FLIGHT_BOUND_BYTES, f"the upstream ran {ahead[0]} bytes ahead"
    assert growth < RSS_GROWTH_BOUND_MIB, f"the gateway grew by {growth:.1f} MiB"
