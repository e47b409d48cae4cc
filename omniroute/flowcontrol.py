"""Back-pressure for streamed HTTP responses under daphne.

Daphne's ASGI ``send`` returns as soon as a body part is handed to Twisted, whose transport
buffers without bound: a client that reads slowly made the gateway read the upstream at full
speed and hold the difference in memory. Here ``send`` waits while the client's transport is
full, so the relay stops reading the upstream, aiohttp's buffer fills and TCP flow control
pushes back to the upstream.

Twisted's producer/consumer API carries the signal: a streamed response registers its request
as a push producer on the HTTP channel, which forwards the transport's ``pauseProducing``
(write buffer over its high-water mark, 64 KiB) and ``resumeProducing`` (buffer drained). The
producer is registered before the first ``more_body`` part is written, so that write, or any
later one, pauses it even if the transport was already full. It is unregistered at ``finish``
and when the connection is lost (``stopProducing``, then ``connectionLost``), which also
releases a waiting ``send``; daphne then queues ``http.disconnect`` as before and drops every
later ``send``.

:class:`FlowControlledCommandLine` is daphne's command line with these classes in place;
``omniroute.server`` (so ``manage.py serve``) runs it as extended by ``omniroute.shutdown``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import daphne.server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server

logger = logging.getLogger("omniroute.server")


class FlowControlledRequest(WebRequest):
    """Daphne's request that is also the push producer of its own streamed response."""

    #: Set while the client's transport is paused; ``send`` waits on it between body parts.
    drained: asyncio.Event | None = None

    def handle_reply(self, message: dict[str, Any]) -> None:
        if self.producer is None and message.get("more_body") and self.channel is not None:
            if self._response_started and not self.finished:
                self.registerProducer(self, True)
        super().handle_reply(message)

    def finish(self) -> None:
        self._unregister()
        super().finish()

    def connectionLost(self, reason: Any) -> None:
        self._unregister()
        super().connectionLost(reason)

    def _unregister(self) -> None:
        self._release()
        if self.producer is not None and self.channel is not None:
            self.unregisterProducer()

    # IPushProducer, called by the channel on behalf of the transport.

    def pauseProducing(self) -> None:
        if self.drained is None:
            self.drained = asyncio.Event()

    def resumeProducing(self) -> None:
        self._release()

    def stopProducing(self) -> None:
        self._release()

    def _release(self) -> None:
        drained, self.drained = self.drained, None
        if drained is not None:
            drained.set()


class FlowControlledFactory(HTTPFactory):
    """Daphne's HTTP factory, building :class:`FlowControlledRequest` requests."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = FlowControlledRequest
        return protocol


class FlowControlledServer(Server):
    """Daphne's server whose ASGI ``send`` waits while the client's transport is paused."""

    http_factory_class: type[HTTPFactory] = FlowControlledFactory

    def run(self) -> None:
        # ``Server.run`` builds its HTTP factory from this module-level name.
        daphne.server.HTTPFactory = self.http_factory_class
        super().run()

    def listen_success(self, port: Any) -> None:
        """Once bound, say where (daphne's own line is at INFO on a logger kept at WARNING)."""
        super().listen_success(port)
        host = port.getHost() if hasattr(port, "getHost") else None
        if host is not None and hasattr(host, "port"):
            logger.info("gateway listening on %s", listening_url(host.host, host.port))

    async def handle_reply(self, protocol: Any, message: dict[str, Any]) -> None:
        await super().handle_reply(protocol, message)
        drained = getattr(protocol, "drained", None)  # None too for WebSocket protocols
        if drained is not None:
            await drained.wait()


class FlowControlledCommandLine(CommandLineInterface):
    """Daphne's command line, running :class:`FlowControlledServer`."""

    server_class = FlowControlledServer


def listening_url(host: str, port: int) -> str:
    """The address a client dials: ``http://host:port`` (an IPv6 host in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
