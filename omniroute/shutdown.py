"""The gateway's stop: daphne's server and command line, closing the upstream pools and
writing the request log's queued records last.

Daphne speaks no ASGI lifespan, so nothing tells the application that the process is ending.
On SIGINT or SIGTERM its reactor cancels every running request before shutting down
(``Server.kill_all_applications``, a "before shutdown" trigger the reactor waits for).
:class:`GatewayServer` first drains: it stops listening, sets the stop signal
(``omniroute.core.stopping``: open streams end with the in-band ``server_shutting_down`` error, a
request arriving on a connection still open gets a 503) and waits until the running requests
are over, ``SHUTDOWN_GRACE_SECONDS`` at most; then daphne cancels what is left. Once they are
gone, it closes the upstream connection pools (aiohttp sessions) on the same event loop, then
waits (a few seconds at most) for the request log's writer to write what the finished and
cancelled requests queued (``omniroute.lifespan.stop_cleanly``, which uvicorn's lifespan runs
too). A failure is logged and never stops the shutdown.

The server also leaves the request's scheme alone whatever X-Forwarded-Proto says: Django's
``SECURE_PROXY_SSL_HEADER`` decides that (``OMNIROUTE_SECURE_PROXY_SSL_HEADER``).

``omniroute.server`` (so ``manage.py serve``) runs :class:`GatewayCommandLine`; importing
this module imports daphne, which installs its reactor.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from daphne.http_protocol import WebRequest
from django.conf import settings
from twisted.internet.defer import Deferred

from omniroute.body_timeout import bound_request_time
from omniroute.collector import tune_collector
from omniroute.core import stopping
from omniroute.flowcontrol import (
    FlowControlledCommandLine,
    FlowControlledFactory,
    FlowControlledServer,
)
from omniroute.lifespan import stop_cleanly

logger = logging.getLogger("omniroute.server")


class GatewayFactory(FlowControlledFactory):
    """The flow-controlled HTTP factory whose connections bound how long a request may take
    to arrive (omniroute/body_timeout.py)."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        bound_request_time(protocol, settings.BODY_TIMEOUT_SECONDS)
        return protocol


class GatewayServer(FlowControlledServer):
    """The flow-controlled daphne server that drains, then closes the upstream pools and
    writes the request log's queue when it stops, and answers a request that stops arriving
    with a 408."""

    http_factory_class = GatewayFactory

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # ``--proxy-headers`` (client addresses from X-Forwarded-For) would also make daphne
        # take the scheme from any client's X-Forwarded-Proto. Whether to believe that header
        # is the operator's call, OMNIROUTE_SECURE_PROXY_SSL_HEADER (docs/deploying.md).
        kwargs["proxy_forwarded_proto_header"] = None
        super().__init__(*args, **kwargs)
        self.ports: list[Any] = []  # the listening ports, closed when the stop begins
        tune_collector(settings.GC_GEN0_THRESHOLD)  # the application is loaded by now

    def listen_success(self, port: Any) -> None:
        super().listen_success(port)
        self.ports.append(port)

    def kill_all_applications(self) -> Deferred[Any]:
        stopped: Deferred[Any] = Deferred.fromFuture(asyncio.ensure_future(self.drain()))
        stopped.addCallback(lambda _: super(GatewayServer, self).kill_all_applications())
        stopped.addCallback(lambda _: Deferred.fromFuture(asyncio.ensure_future(stop_cleanly())))
        return stopped

    async def drain(self) -> None:
        """Stop listening, set the stop signal, and wait until the running requests are over,
        ``SHUTDOWN_GRACE_SECONDS`` at most."""
        for port in self.ports:
            port.stopListening()
        stopping.shutting_down.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + stopping.SHUTDOWN_GRACE_SECONDS
        running = self.running_applications()
        if running:
            logger.info("stopping: waiting for %d running request(s)", len(running))
        while running and (left := deadline - loop.time()) > 0:
            await asyncio.wait(running, timeout=left)
            running = self.running_applications()  # and any that came on an open connection

    def running_applications(self) -> list[asyncio.Future[Any]]:
        """The HTTP requests' application instances still running (a WebSocket, the
        dashboard's, lasts as long as its page: daphne cancels it with what is left)."""
        return [
            instance
            for protocol, details in self.connections.items()
            if isinstance(protocol, WebRequest)
            and (instance := details.get("application_instance")) is not None
            and not instance.done()
        ]


class GatewayCommandLine(FlowControlledCommandLine):
    """Daphne's command line, running :class:`GatewayServer`."""

    server_class = GatewayServer
