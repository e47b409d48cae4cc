"""The configuration version: when it moves, every reader of the configuration rebuilds.

Every configuration write (routing's connections, keys and combos; resilience's rules and
settings) ends with ``config_changed()`` once its transaction commits. The local version moves
at once; with a shared store (Redis) a counter there tells the other processes, which poll it
through ``config_remote_version()`` at most every ``CONFIG_POLL_SECONDS``. The routing snapshot
compares both versions with the ones it was built from.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time

from asgiref.sync import async_to_sync
from django.conf import settings

from omniroute.core.state import get_store, store_is_shared

CONFIG_VERSION_KEY = "config:version"


class _Versions:
    """Mutable process state behind the module functions below."""

    def __init__(self) -> None:
        self.counter = itertools.count(1)
        self.local = next(self.counter)
        self.remote = 0
        self.polled_at = -math.inf


_versions = _Versions()
_announcements: set[asyncio.Task[None]] = set()


def config_local_version() -> int:
    """This process's version: it moves on every change made here."""
    return _versions.local


def config_local_bump() -> int:
    """Move the local version without telling anyone (a forced rebuild); the new version."""
    _versions.local = next(_versions.counter)
    return _versions.local


def config_changed() -> None:
    """Mark the configuration as changed (services call it after their commit)."""
    config_local_bump()
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


def config_remote_forget() -> None:
    """Have the next :func:`config_remote_version` read the shared store, however recently it
    last did (a snapshot forgotten must not be rebuilt on a version read before)."""
    _versions.polled_at = -math.inf


async def config_remote_version() -> int:
    """The shared version (0 without a shared store), polled at most every
    ``CONFIG_POLL_SECONDS``: between polls the last value read is returned."""
    if not store_is_shared():
        return 0
    now = time.monotonic()
    if now - _versions.polled_at >= settings.CONFIG_POLL_SECONDS:
        _versions.polled_at = now
        _versions.remote = await get_store().get_counter(CONFIG_VERSION_KEY)
    return _versions.remote
