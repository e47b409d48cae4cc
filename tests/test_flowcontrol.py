"""The back-pressure lifecycle of a daphne request (``omniroute.flowcontrol``), in process.

A real Twisted ``HTTPChannel`` on a ``StringTransport``; the tests play the transport (pause,
resume, stop, connection lost) and the application (``server.handle_reply`` is its ``send``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from omniroute.flowcontrol import FlowControlledFactory, FlowControlledServer

GET = b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n\r\n"
START = {"type": "http.response.start", "status": 200, "headers": []}
BLOCKED_S = 0.05  # how long a send must stay blocked to count as waiting


def part(body: bytes, more: bool = True) -> dict[str, Any]:
    return {"type": "http.response.body", "body": body, "more_body": more}


async def _idle(scope: Any, receive: Any, send: Any) -> None:
    """The application instance daphne starts; the tests send on its behalf."""


class Connection:
    """One client connection: the channel, its transport and daphne's requests on it."""

    def __init__(self, requests: bytes = GET) -> None:
        self.server = FlowControlledServer(_idle, endpoints=["tcp:0"])
        self.server.connections = {}
        self.protocol = FlowControlledFactory(self.server).buildProtocol(
            IPv4Address("TCP", "127.0.0.1", 40000)
        )
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)
        self.channel: Any = self.transport.producer  # the HTTPChannel: the transport's producer
        self.protocol.dataReceived(requests)

    def request(self, index: int = 0) -> Any:
        return list(self.server.connections)[index]

    async def send(self, message: dict[str, Any], index: int = 0) -> None:
        await self.server.handle_reply(self.request(index), message)


async def _blocked(send: asyncio.Task[None]) -> bool:
    done, _ = await asyncio.wait([send], timeout=BLOCKED_S)
    return not done


async def test_a_send_waits_while_the_transport_is_paused() -> None:
    conn = Connection()
    await conn.send(START)
    await conn.send(part(b"first"))
    assert conn.channel._requestProducer is conn.request()

    conn.channel.pauseProducing()
    send = asyncio.create_task(conn.send(part(b"second")))
    assert await _blocked(send)
    conn.channel.resumeProducing()
    await asyncio.wait_for(send, 1)

    await conn.send(part(b"", more=False))
    assert conn.channel._requestProducer is None
    assert b"first" in conn.transport.value() and b"second" in conn.transport.value()


async def test_the_next_request_on_the_connection_streams_too() -> None:
    conn = Connection(requests=GET + GET)
    for index in (0, 1):
        await conn.send(START, index)
        await conn.send(part(b"x"), index)
        assert conn.channel._requestProducer is conn.request(index)
        await conn.send(part(b"", more=False), index)
        assert conn.channel._requestProducer is None


async def test_a_one_part_response_registers_no_producer() -> None:
    conn = Connection()
    await conn.send(START)
    conn.channel.pauseProducing()  # a full transport does not hold a one-part answer back
    await asyncio.wait_for(conn.send(part(b"all", more=False)), 1)
    assert conn.request().producer is None and conn.request().finished


@pytest.mark.parametrize("loss", ["stopProducing", "connectionLost"])
async def test_a_lost_connection_releases_a_waiting_send(loss: str) -> None:
    conn = Connection()
    await conn.send(START)
    await conn.send(part(b"first"))
    conn.channel.pauseProducing()
    send = asyncio.create_task(conn.send(part(b"second")))
    assert await _blocked(send)

    request = conn.request()
    if loss == "stopProducing":  # what the transport does first when the connection drops
        conn.channel.stopProducing()
    else:  # the channel was already unregistered from its transport (``loseConnection``)
        conn.protocol.connectionLost(Failure(ConnectionDone()))
    await asyncio.wait_for(send, 1)

    conn.protocol.connectionLost(Failure(ConnectionDone()))
    queue = request.application_queue
    messages = [queue.get_nowait() for _ in range(queue.qsize())]
    assert messages[-1] == {"type": "http.disconnect"}
    # Later sends are dropped without waiting, even if the transport reported itself full.
    conn.channel.pauseProducing()
    await asyncio.wait_for(conn.send(part(b"third")), 1)
