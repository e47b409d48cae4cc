"""The configuration snapshot the hot path reads, and its invalidation.

Writes go through services, which call ``config_changed()`` (``resilience.services.
config_version``, the version's owner): the local version moves at once and, with a shared
store, a counter there tells the other processes, which poll it at most every
``CONFIG_POLL_SECONDS``. A request therefore reads a dict, never the database, unless the
configuration changed since the last one.
"""

from __future__ import annotations

import asyncio

from omniroute.core.config_version import (
    config_local_bump,
    config_local_version,
    config_remote_forget,
    config_remote_version,
)
from omniroute.core.db import db_sync_to_async
from routing.domain.config.snapshot import ConfigSnapshot
from routing.selectors import config_snapshot_build


class _Holder:
    """Mutable process state behind the module functions below."""

    def __init__(self) -> None:
        self.snapshot: ConfigSnapshot | None = None
        self.building: asyncio.Future[ConfigSnapshot] | None = None


_holder = _Holder()


async def current_snapshot() -> ConfigSnapshot:
    """The current snapshot, rebuilt only when a version moved."""
    snapshot = _holder.snapshot
    remote = await config_remote_version()
    if (
        snapshot is not None
        and snapshot.version == config_local_version()
        and snapshot.remote_version == remote
    ):
        return snapshot
    return await _rebuild(remote)


async def _rebuild(remote: int) -> ConfigSnapshot:
    building = _holder.building
    if building is not None and building.get_loop() is asyncio.get_running_loop():
        return await asyncio.shield(building)
    task = asyncio.ensure_future(_build(config_local_version(), remote))
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
    """Forget the snapshot (tests; a new database), and the shared version read for it."""
    _holder.snapshot = None
    config_local_bump()
    config_remote_forget()
