"""What the client is told when the upstream cannot be reached, over real sockets.

The chat consumer runs on the production transport (aiohttp under httpx) against the fake
upstream resetting the connection, a port nothing listens on, and a listener whose accept
queue is full (a connect that times out). The error code and status stay what clients rely
on; the message names what happened instead of httpx-aiohttp's blanket ``ConnectTimeout``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from omniroute.core.store import MemoryStore
from omniroute.tools.fakeupstream import FakeUpstream
from routing.models import Provider
from routing.proxy.consumers import ChatCompletionsConsumer
from routing.proxy.upstream.client import Upstream, build_transport
from tests.conftest import free_port
from tests.routing.harness import (
    ACME_MODEL,
    PRIMARY,
    Reply,
    add_connection,
    chat,
    communicator,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)

CONNECT_TIMEOUT_SECONDS = 0.3
ACCESS_LOGGER = "omniroute.access"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream().start() as upstream:
        yield upstream


@pytest.fixture
def full_listener() -> Iterator[int]:
    """A port whose accept queue is full: a new connection's SYN goes unanswered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, listener):
        sock.close()


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    return caplog


@pytest.fixture
async def upstream(settings: Settings) -> AsyncIterator[Upstream]:
    """The production transport, with a short connect timeout."""
    settings.UPSTREAM_CONNECT_TIMEOUT_SECONDS = CONNECT_TIMEOUT_SECONDS
    transport = build_transport()
    yield Upstream(transport)
    await transport.aclose()


async def connect(provider: Provider, base_url: str) -> None:
    await database_sync_to_async(add_connection)(provider, "primary", PRIMARY, base_url=base_url)


async def ask(upstream: Upstream, store: MemoryStore, key: str) -> Reply:
    app: Any = ChatCompletionsConsumer.as_asgi(upstream=upstream, store=store)
    comm = communicator(app, key)
    await send_body(comm, chat(ACME_MODEL))
    return await read_reply(comm)


def access_error(caplog: pytest.LogCaptureFixture) -> str:
    """The ``error`` of the one access line, as the plain line writes it."""
    [record] = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    return record.getMessage().rsplit(" error=", 1)[1]


def error_of(reply: Reply) -> tuple[int, str, str]:
    error = reply.json()["error"]
    return reply.status, error["code"], error["message"]


async def test_a_reset_before_the_answer_is_named_a_reset(
    fresh_snapshot: None,
    acme: Provider,
    plain_key: str,
    store: MemoryStore,
    upstream: Upstream,
    fake: FakeUpstream,
    access_log: pytest.LogCaptureFixture,
) -> None:
    await connect(acme, fake.base_url(reset="before"))

    status, code, message = error_of(await ask(upstream, store, plain_key))

    assert (status, code) == (502, "upstream_unreachable")
    assert "connection reset" in message and "ConnectTimeout" not in message
    assert access_error(access_log) == '"connection reset by peer"'


async def test_a_closed_port_is_named_refused(
    fresh_snapshot: None,
    acme: Provider,
    plain_key: str,
    store: MemoryStore,
    upstream: Upstream,
    access_log: pytest.LogCaptureFixture,
) -> None:
    await connect(acme, f"http://127.0.0.1:{free_port()}/v1")

    status, code, message = error_of(await ask(upstream, store, plain_key))

    assert (status, code) == (502, "upstream_unreachable")
    assert "connection refused" in message and "ConnectTimeout" not in message
    assert access_error(access_log) == '"connection refused"'


async def test_a_connect_that_times_out_is_still_a_timeout(
    fresh_snapshot: None,
    acme: Provider,
    plain_key: str,
    store: MemoryStore,
    upstream: Upstream,
    full_listener: int,
    access_log: pytest.LogCaptureFixture,
) -> None:
    await connect(acme, f"http://127.0.0.1:{full_listener}/v1")

    status, code, message = error_of(await ask(upstream, store, plain_key))

    assert (status, code) == (504, "upstream_timeout")
    assert "(connect timeout)" in message
    assert access_error(access_log) == '"connect timeout"'
