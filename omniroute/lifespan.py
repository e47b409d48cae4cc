"""The ASGI lifespan of the gateway: what a server that speaks it (uvicorn) tells the
application at start and stop.

At stop, once the server has let the open requests finish (or cancelled them after its graceful
timeout), :func:`stop_cleanly` closes the upstream connection pools (aiohttp sessions) on the
serving event loop (left open, each is reported at exit as an ``Unclosed client session``
error), then waits, a few seconds at most, for the request log's writer to write what the
finished requests queued: its thread dies with the process. Daphne speaks no lifespan:
``omniroute.shutdown`` runs the same :func:`stop_cleanly` from its own stop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger("omniroute.server")

__all__ = ["Lifespan", "close_pools", "flush_request_log", "stop_cleanly"]


async def close_pools() -> None:
    """Close the upstream pools; log, never raise, when that fails."""
    from routing.proxy.shell import close_upstream_pools  # Django is set up by now

    try:
        await close_upstream_pools()
    except Exception:
        logger.exception("closing the upstream connection pools failed")


async def flush_request_log() -> None:
    """Wait for the request log's queued records to be written, off the event loop and
    bounded; log, never raise, when they could not all be."""
    from omniroute.core.observability.requestlog.writer import FLUSH_SECONDS, request_log_flush

    try:
        written = await asyncio.to_thread(request_log_flush)
    except Exception:
        logger.exception("writing the request log's queued records failed")
        return
    if not written:
        logger.warning("the request log's queue was not written within %s s", FLUSH_SECONDS)


async def stop_cleanly() -> None:
    """What the gateway does once its last request is over: close the upstream pools, then
    write the request log's queue."""
    await close_pools()
    await flush_request_log()


class Lifespan:
    """The ``lifespan`` scope's application: nothing to start, the pools to close at stop."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stop_cleanly()
                await send({"type": "lifespan.shutdown.complete"})
                return
