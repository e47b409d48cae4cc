"""Per-process chores of the resilience layer: the cold-start restore and periodic tasks.

Called from the proxy on each request; each call is a dictionary lookup and a clock read
unless a chore is due, and the chores themselves run once per process (restore) or in the
background: the breaker sweep every ``SWEEP_INTERVAL_SECONDS``, the expired re-check pass
(routing's, handed in through ``resilience.hooks``) every
``EXPIRED_RECHECK_INTERVAL_SECONDS``.

The breakers and model locks persisted in the database, and the durable state the upper
layers hand in (``resilience.hooks``: routing's session-affinity pins), are restored into
the store again whenever the store may have lost them: when Redis answers again after an outage,
and when the store finds Redis restarted (its next connection sees a new server, even with no
failed call in between) -- both run the store's recovery callback before it serves any other
call.  Redis losing its data without a restart (flushed) shows as a missing restore marker, a
key written after every restore and checked every ``MARKER_CHECK_INTERVAL_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from omniroute.core.db import db_sync_to_async
from omniroute.core.events import apart_from_requests
from omniroute.core.store import StateStore
from omniroute.core.store.resilient import ResilientStore
from resilience.hooks import DurableState, hooks
from resilience.persistence import persisted_breakers, persisted_lock_records
from resilience.services.breakers import breaker_restore, breaker_sweep
from resilience.services.lockouts import lockout_restore

logger = logging.getLogger(__name__)
SWEEP_INTERVAL_SECONDS = 300.0
EXPIRED_RECHECK_INTERVAL_SECONDS = 60.0
MARKER_CHECK_INTERVAL_SECONDS = 10.0
RESTORE_MARKER_KEY = "housekeeping:restored"

_restores: dict[int, asyncio.Future[int]] = {}
_background: set[asyncio.Task[object]] = set()


@dataclass(slots=True)
class _StoreChores:
    """When one store was last checked for lost data and swept, and the task while it runs."""

    checked_at: float
    swept_at: float
    task: asyncio.Task[object] | None = None


_store_chores: dict[int, _StoreChores] = {}


@dataclass(slots=True)
class _Periodic:
    """A per-process periodic pass (what it runs comes from the hooks): when it last started,
    and the task while it runs."""

    last_started: float | None = None
    task: asyncio.Task[object] | None = None


_expired_recheck = _Periodic()


async def _restore(store: StateStore, *, overwrite: bool = False) -> int:
    rows = await db_sync_to_async(persisted_breakers)()
    restored = await breaker_restore(store=store, rows=rows, overwrite=overwrite)
    # Locks before the first request too: a locked model must not serve in between.
    locks = await db_sync_to_async(persisted_lock_records)(store.clock())
    locked = await lockout_restore(store=store, rows=locks, overwrite=overwrite)
    for durable in hooks().durable_states:  # soft state: never on a request's path
        _in_background(_restore_durable(durable, store, overwrite))
    await store.set(RESTORE_MARKER_KEY, True)
    if restored or locked:
        logger.info("restored %d breaker(s), %d model lock(s) from the database", restored, locked)
    return restored


@dataclass(frozen=True, slots=True)
class _RestoreOnRecovery:
    """The recovery callback of one store (equal for the same store: registered once)."""

    store: StateStore

    async def __call__(self) -> None:
        await _restore(self.store, overwrite=True)  # durable state: the database wins


def _watch_recovery(store: StateStore) -> None:
    """Restore again each time a Redis-backed store reconnects after an outage or finds Redis
    restarted: Redis may have lost the breakers, and what was recorded meanwhile lived only in
    this process. The store holds its other calls until the breakers and model locks are
    back (registered durable state follows in the background)."""
    if isinstance(store, ResilientStore):
        store.on_recovered(_RestoreOnRecovery(store))


async def resilience_ready(store: StateStore, *, chores: bool = True) -> None:
    """Restore persisted breakers into ``store`` once, and start the chores that are due.

    Sync callers (admin, API views through ``async_to_sync``) pass ``chores=False``: their
    event loop ends with the call, and a background chore started there would die with it, so
    they also wait for the durable state's restore their call started (else whether it ran
    would depend on timing).
    """
    restore = _restores.get(id(store))
    if restore is None or restore.get_loop() is not asyncio.get_running_loop():
        _watch_recovery(store)
        restore = _restores[id(store)] = asyncio.ensure_future(_restore(store))
    if not restore.done():
        await asyncio.shield(restore)
    if not chores:
        await housekeeping_settle()
    if chores:
        _maybe_check_store(store)
        _maybe_recheck_expired()


async def housekeeping_settle() -> None:
    """Wait until the chores running on this event loop have ended (tests, shutdown)."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _background if task.get_loop() is loop]:
        await asyncio.gather(*mine, return_exceptions=True)


def _in_background(work: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
    task: asyncio.Task[object] = asyncio.ensure_future(apart_from_requests(work))
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


def _maybe_check_store(store: StateStore) -> None:
    """Every ``MARKER_CHECK_INTERVAL_SECONDS`` (the first one interval after the first
    request), check the restore marker in the background, sweeping every
    ``SWEEP_INTERVAL_SECONDS``; never two checks of one store at once."""
    now = time.monotonic()
    chores = _store_chores.get(id(store))
    if chores is None:
        _store_chores[id(store)] = _StoreChores(checked_at=now, swept_at=now)
        return
    if now - chores.checked_at < MARKER_CHECK_INTERVAL_SECONDS:
        return
    if chores.task is not None and not chores.task.done():
        return
    chores.checked_at = now
    sweep = now - chores.swept_at >= SWEEP_INTERVAL_SECONDS
    if sweep:
        chores.swept_at = now
    chores.task = _in_background(_check_store(store, sweep=sweep))


async def _check_store(store: StateStore, *, sweep: bool) -> None:
    try:
        if await store.get(RESTORE_MARKER_KEY) is None:
            logger.warning(
                "the state store lost its data (Redis restarted or flushed, or the process "
                "serves from local state): restoring breakers from the database"
            )
            await _restore(store)
        if sweep:
            await breaker_sweep(store=store)
            await _sweep_durables(store)
    except Exception:
        logger.exception("state store check failed")


async def _restore_durable(durable: DurableState, store: StateStore, overwrite: bool) -> None:
    try:
        count = await durable.restore(store, overwrite)
    except Exception:  # the breakers and the other kinds are restored all the same
        logger.exception("restoring %s failed", durable.name)
        return
    if count:
        logger.info("restored %d record(s) of %s from the database", count, durable.name)


async def _sweep_durables(store: StateStore) -> None:
    for durable in hooks().durable_states:
        if durable.sweep is None:
            continue
        try:
            await durable.sweep(store)
        except Exception:
            logger.exception("sweeping %s failed", durable.name)


def _maybe_recheck_expired() -> None:
    """Start an expired re-check pass every interval; never two at once (probes can be slow)."""
    now, periodic = time.monotonic(), _expired_recheck
    if hooks().expired_recheck is None:
        return
    if periodic.last_started is None:
        periodic.last_started = now  # the first pass is one interval after the first request
    running = periodic.task is not None and not periodic.task.done()
    if running or now - periodic.last_started < EXPIRED_RECHECK_INTERVAL_SECONDS:
        return
    periodic.last_started = now
    periodic.task = _in_background(_recheck_expired())


async def _recheck_expired() -> None:
    # Not thread-sensitive: the probes block on the network, and clearing a connection waits
    # for the breaker/connection write-through, which runs on Django's single sync thread.
    run = hooks().expired_recheck
    if run is None:
        return
    try:
        await db_sync_to_async(run, thread_sensitive=False)()
    except Exception:
        logger.exception("expired re-check pass failed")
