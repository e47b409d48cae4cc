"""A request body that stops arriving is answered 408 in its wire format's JSON within the
gateway's body timeout (``OMNIROUTE_BODY_TIMEOUT_SECONDS``), through a real daphne and a real
uvicorn; a slow body that keeps arriving is served, and no upstream call is made for one that
never ends."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, records, serving

pytestmark = pytest.mark.e2e

BODY_TIMEOUT_SECONDS = 1.0
READ_BOUND_SECONDS = 10.0  # generous: the answer must come long before the socket gives up


@pytest.fixture(scope="module", params=["daphne", "uvicorn"])
def slow_gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    env, key = prepare_gateway(
        tmp_path_factory.mktemp(f"body-timeout-{request.param}"),
        OMNIROUTE_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT_SECONDS),
    )
    with serving(env, key, "--server", request.param) as running:
        yield running


def connect(gateway: Gateway) -> socket.socket:
    address = urlsplit(gateway.url)
    assert address.hostname is not None and address.port is not None
    return socket.create_connection((address.hostname, address.port))


def head(path: str, length: int, key: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def answer_of(sock: socket.socket) -> tuple[int, dict[str, object], float]:
    """The status and JSON body of the answer on ``sock``, and when its first byte came."""
    sock.settimeout(READ_BOUND_SECONDS)
    data = sock.recv(65536)
    arrived = time.monotonic()
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    raw_head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in raw_head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(raw_head.split(b" ", 2)[1]), orjson.loads(body), arrived


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/messages", "anthropic"),
        ("/api/providers/", "openai"),
    ],
)
def test_a_stalled_body_gets_a_408_in_its_wire_format(
    slow_gateway: Gateway, fake: FakeUpstream, path: str, shape: str
) -> None:
    route = make_route(slow_gateway, fake, {})
    key = route.key if path.startswith("/v1") else slow_gateway.manage_key
    with connect(slow_gateway) as sock:
        sock.sendall(head(path, 1000, key) + b'{"model": "')
        sent = time.monotonic()
        status, body, arrived = answer_of(sock)

    assert status == 408
    assert BODY_TIMEOUT_SECONDS * 0.9 <= arrived - sent < READ_BOUND_SECONDS
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "request_timeout"
    if shape == "anthropic":
        assert body["type"] == "error"
    assert records(fake, route, path="") == []  # no upstream call for a body never finished


def test_a_slow_body_that_keeps_arriving_is_served(
    slow_gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(slow_gateway, fake, {})
    payload = orjson.dumps(
        {"model": route.model(), "messages": [{"role": "user", "content": "hi"}]}
    )
    with connect(slow_gateway) as sock:
        sock.sendall(head("/v1/chat/completions", len(payload), route.key))
        for start in range(0, len(payload), 16):  # each part well within the timeout
            sock.sendall(payload[start : start + 16])
            time.sleep(BODY_TIMEOUT_SECONDS / 4)
        status, body, _ = answer_of(sock)

    assert status == 200, body
    assert len(records(fake, route)) == 1
