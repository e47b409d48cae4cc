"""Daphne's stop drains first (``omniroute.shutdown``): it stops listening, sets the stop
signal (``omniroute.core.stopping``) and waits for the running HTTP requests, never for a
WebSocket (the dashboard's lasts as long as its page)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from daphne.http_protocol import WebRequest
from daphne.ws_protocol import WebSocketProtocol

from omniroute.core import stopping
from omniroute.shutdown import GatewayServer

# Far below the grace period: a drain that waited for the WebSocket would take all of it.
DRAINED_WITHIN_SECONDS = stopping.SHUTDOWN_GRACE_SECONDS / 6


async def _idle(scope: Any, receive: Any, send: Any) -> None:
    """The application daphne would start; these tests put its instances in place."""


class Port:
    """A listening port."""

    listening = True

    def stopListening(self) -> None:
        self.listening = False


@pytest.fixture
def signal(monkeypatch: pytest.MonkeyPatch, collector_restored: None) -> stopping.ShuttingDown:
    """A fresh stop signal (and the collector restored: the server tunes it)."""
    fresh = stopping.ShuttingDown()
    monkeypatch.setattr(stopping, "shutting_down", fresh)
    return fresh


async def test_the_drain_waits_for_a_running_request_but_not_for_a_websocket(
    signal: stopping.ShuttingDown,
) -> None:
    server = GatewayServer(_idle, endpoints=["tcp:0"])
    port = Port()
    server.ports.append(port)
    loop = asyncio.get_running_loop()
    request, websocket = loop.create_future(), loop.create_future()
    server.connections = {
        WebRequest.__new__(WebRequest): {"application_instance": request},
        WebSocketProtocol.__new__(WebSocketProtocol): {"application_instance": websocket},
    }

    drained = asyncio.ensure_future(server.drain())
    await asyncio.sleep(0)

    assert not port.listening and signal.is_set()
    assert not drained.done()  # the request is still running
    request.set_result(None)
    await asyncio.wait_for(drained, DRAINED_WITHIN_SECONDS)
    assert not websocket.done()  # left to daphne's cancel
