"""Background writes: short database writes queued from async code, run in order, best effort.

A write is queued as a task on Django's single sync thread (``db_sync_to_async``), so the
writes run in the order they were made. Most never hold up the request that caused them; a
caller whose write must land before it answers awaits the task it gets back (a breaker
opening, a terminal state, an upstream-hinted cooldown). A write that fails is logged and
dropped: the state store stays authoritative while the process lives.

Every app queues here (resilience its breaker, lock and connection rows, routing its
session-affinity pins), so one :func:`flush` waits for all of them: the operator services
before they answer, a connection reset before it clears the row, the tests between cases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from omniroute.core.db import db_sync_to_async

__all__ = ["flush", "write_in_background"]

logger = logging.getLogger(__name__)
_pending: set[asyncio.Task[None]] = set()


def _run(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        logger.exception("write-through failed (%s)", getattr(fn, "__name__", fn))


def write_in_background(fn: Callable[..., None], *args: Any) -> asyncio.Task[None]:
    """Queue ``fn(*args)`` (sync: one short write of a row) behind the other background
    writes: in order, on Django's sync thread, best effort (a failure is logged and dropped).
    Await the task for a write that must land before the answer."""
    task = asyncio.get_running_loop().create_task(db_sync_to_async(_run)(fn, *args))
    _pending.add(task)
    task.add_done_callback(_pending.discard)
    return task


async def flush() -> None:
    """Wait until every write queued on the running event loop has run, those queued
    meanwhile included."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _pending if task.get_loop() is loop]:
        await asyncio.gather(*mine, return_exceptions=True)
