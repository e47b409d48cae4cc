"""Per-process chores of the resilience layer: the cold-start restore and periodic sweeps.

Called from the proxy on each request; each call is a dictionary lookup and a clock read
unless a chore is due, and the chores themselves run once per process (restore) or in the
background every ``SWEEP_INTERVAL_SECONDS`` (sweep).
"""

from __future__ import annotations

import asyncio
import logging
import time

from channels.db import database_sync_to_async

from resilience.persistence import persisted_breakers
from resilience.services.breakers import breaker_restore, breaker_sweep
from resilience.store import StateStore

logger = logging.getLogger(__name__)
SWEEP_INTERVAL_SECONDS = 300.0

_restores: dict[int, asyncio.Future[int]] = {}
_last_sweep: dict[int, float] = {}
_background: set[asyncio.Task[object]] = set()


async def _restore(store: StateStore) -> int:
    rows = await database_sync_to_async(persisted_breakers)()
    restored = await breaker_restore(store=store, rows=rows)
    if restored:
        logger.info("restored %d breaker(s) from the database", restored)
    return restored


async def resilience_ready(store: StateStore) -> None:
    """Restore persisted breakers into ``store`` once, and start a sweep when one is due."""
    restore = _restores.get(id(store))
    if restore is None or restore.get_loop() is not asyncio.get_running_loop():
        restore = _restores[id(store)] = asyncio.ensure_future(_restore(store))
    if not restore.done():
        await asyncio.shield(restore)
    _maybe_sweep(store)


def _maybe_sweep(store: StateStore) -> None:
    now = time.monotonic()
    if now - _last_sweep.setdefault(id(store), now) < SWEEP_INTERVAL_SECONDS:
        return
    _last_sweep[id(store)] = now
    task: asyncio.Task[object] = asyncio.ensure_future(breaker_sweep(store=store))
    _background.add(task)
    task.add_done_callback(_background.discard)
