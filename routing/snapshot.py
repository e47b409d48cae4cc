"""The configuration snapshot the hot path reads, and its invalidation.

Writes go through services, which call ``config_changed()``: the local version moves at once
and, with a shared store, a counter there tells the other processes, which poll it at most every
``CONFIG_POLL_SECONDS``. A request therefore reads a dict, never the database, unless the
configuration changed since the last one.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from asgiref.sync import async_to_sync
from django.conf import settings

from resilience.db import db_sync_to_async
from resilience.state import get_store, store_is_shared
from routing.domain.config import ConfigSnapshot
from routing.selectors import config_snapshot_build

CONFIG_VERSION_KEY = "config:version"


class _Holder:
    """Mutable process state behind the module functions below."""

    def __init__(self) -> None:
        self.counter = itertools.count(1)
        self.local_version = next(self.counter)
        self.snapshot: ConfigSnapshot | None = None
        self.remote_version = 0
        self.polled_at = 0.0
        self.building: asyncio.Future[ConfigSnapshot] | None = None


_holder = _Holder()
_announcements: set[asyncio.Task[None]] = set()


def config_changed() -> None:
    """Mark the routing configuration as changed (services call it after their commit)."""
    _holder.local_version = next(_holder.counter)
    if not store_is_shared():
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a service in a sync thread
        async_to_sync(_announce)()
        return
    task = loop.create_task(_announce())  # called from async code: don't block its loop
    _announcements.add(task)
    task.add_done_callback(_announcements.discard)


async def _announce() -> None:
    """Tell the other processes, through the shared store."""
    await get_store().incr(CONFIG_VERSION_KEY)


async def _remote_version() -> int:
    """The shared version, polled at most every ``CONFIG_POLL_SECONDS``."""
    if not store_is_shared():
        return 0
    now = time.monotonic()
    if now - _holder.polled_at >= settings.CONFIG_POLL_SECONDS:
        _holder.polled_at = now
        _holder.remote_version = await get_store().get_counter(CONFIG_VERSION_KEY)
    return _holder.remote_version


async def current_snapshot() -> ConfigSnapshot:
    """The current snapshot, rebuilt only when a version moved."""
    snapshot = _holder.snapshot
    remote = await _remote_version()
    if (
        snapshot is not None
        and snapshot.version == _holder.local_version
        and snapshot.remote_version == remote
    ):
        return snapshot
    return await _rebuild(remote)


async def _rebuild(remote: int) -> ConfigSnapshot:
    building = _holder.building
    if building is not None and building.get_loop() is asyncio.get_running_loop():
        return await asyncio.shield(building)
    task = asyncio.ensure_future(_build(_holder.local_version, remote))
    _holder.building = task
    try:
        snapshot = await asyncio.shield(task)
    finally:
        if _holder.building is task:
            _holder.building = None
    _holder.snapshot = snapshot
    return snapshot


async def _build(version: int, remote: int) -> ConfigSnapshot:
    snapshot: ConfigSnapshot = await db_sync_to_async(config_snapshot_build)(
        version=version, remote_version=remote
    )
    return snapshot


def snapshot_clear() -> None:
    """Forget the snapshot (tests; a new database)."""
    _holder.snapshot = None
    _holder.local_version = next(_holder.counter)
