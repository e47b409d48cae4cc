"""Per-process chores of the resilience layer: the cold-start restore and periodic tasks.

Called from the proxy on each request; each call is a dictionary lookup and a clock read
unless a chore is due, and the chores themselves run once per process (restore) or in the
background: the breaker sweep every ``SWEEP_INTERVAL_SECONDS``, the expired re-check pass
(``resilience.services.expired``) every ``EXPIRED_RECHECK_INTERVAL_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from resilience.db import db_sync_to_async
from resilience.persistence import persisted_breakers
from resilience.services.breakers import breaker_restore, breaker_sweep
from resilience.services.expired import Recheck, expired_recheck_pass
from resilience.store import StateStore

logger = logging.getLogger(__name__)
SWEEP_INTERVAL_SECONDS = 300.0
EXPIRED_RECHECK_INTERVAL_SECONDS = 60.0

_restores: dict[int, asyncio.Future[int]] = {}
_last_sweep: dict[int, float] = {}
_background: set[asyncio.Task[object]] = set()


@dataclass(slots=True)
class _Periodic:
    """A per-process periodic pass: when it last started, and the task while it runs."""

    last_started: float | None = None
    task: asyncio.Task[object] | None = None


_expired_recheck = _Periodic()


async def _restore(store: StateStore) -> int:
    rows = await db_sync_to_async(persisted_breakers)()
    restored = await breaker_restore(store=store, rows=rows)
    if restored:
        logger.info("restored %d breaker(s) from the database", restored)
    return restored


async def resilience_ready(store: StateStore, *, chores: bool = True) -> None:
    """Restore persisted breakers into ``store`` once, and start the chores that are due.

    Sync callers (admin, API views through ``async_to_sync``) pass ``chores=False``: their
    event loop ends with the call, and a background chore started there would die with it.
    """
    restore = _restores.get(id(store))
    if restore is None or restore.get_loop() is not asyncio.get_running_loop():
        restore = _restores[id(store)] = asyncio.ensure_future(_restore(store))
    if not restore.done():
        await asyncio.shield(restore)
    if chores:
        _maybe_sweep(store)
        _maybe_recheck_expired()


def _in_background(work: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
    task: asyncio.Task[object] = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


def _maybe_sweep(store: StateStore) -> None:
    now = time.monotonic()
    if now - _last_sweep.setdefault(id(store), now) < SWEEP_INTERVAL_SECONDS:
        return
    _last_sweep[id(store)] = now
    _in_background(breaker_sweep(store=store))


def _maybe_recheck_expired() -> None:
    """Start an expired re-check pass every interval; never two at once (probes can be slow)."""
    now, periodic = time.monotonic(), _expired_recheck
    if periodic.last_started is None:
        periodic.last_started = now  # the first pass is one interval after the first request
    running = periodic.task is not None and not periodic.task.done()
    if running or now - periodic.last_started < EXPIRED_RECHECK_INTERVAL_SECONDS:
        return
    periodic.last_started = now
    periodic.task = _in_background(_recheck_expired())


def _expired_pass_now() -> list[Recheck]:
    return expired_recheck_pass(now=timezone.now())


async def _recheck_expired() -> None:
    # Not thread-sensitive: the probes block on the network, and clearing a connection waits
    # for the breaker/connection write-through, which runs on Django's single sync thread.
    try:
        await db_sync_to_async(_expired_pass_now, thread_sensitive=False)()
    except Exception:
        logger.exception("expired re-check pass failed")
