"""The gateway's stop: daphne's server and command line, closing the upstream pools last.

Daphne speaks no ASGI lifespan, so nothing tells the application that the process is ending.
On SIGINT or SIGTERM its reactor cancels every running request before shutting down
(``Server.kill_all_applications``, a "before shutdown" trigger the reactor waits for); once
they are gone, :class:`GatewayServer` closes the upstream connection pools (aiohttp sessions)
on the same event loop. Left open, each pool is reported at exit as an ``Unclosed client
session`` error. A failure to close is logged and never stops the shutdown.

``omniroute.server`` (so ``manage.py serve``) runs :class:`GatewayCommandLine`; importing
this module imports daphne, which installs its reactor.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from twisted.internet.defer import Deferred

from omniroute.flowcontrol import FlowControlledCommandLine, FlowControlledServer

logger = logging.getLogger("omniroute.server")


async def close_pools() -> None:
    """Close the upstream pools; log, never raise, when that fails."""
    from routing.proxy import close_upstream_pools  # Django is set up by now

    try:
        await close_upstream_pools()
    except Exception:
        logger.exception("closing the upstream connection pools failed")


class GatewayServer(FlowControlledServer):
    """The flow-controlled daphne server that closes the upstream pools when it stops."""

    def kill_all_applications(self) -> Deferred[Any]:
        stopped: Deferred[Any] = super().kill_all_applications()
        stopped.addCallback(lambda _: Deferred.fromFuture(asyncio.ensure_future(close_pools())))
        return stopped


class GatewayCommandLine(FlowControlledCommandLine):
    """Daphne's command line, running :class:`GatewayServer`."""

    server_class = GatewayServer
