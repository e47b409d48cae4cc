"""Build the configured ``StateStore`` without depending on Django settings."""

from __future__ import annotations

import time

from .base import Clock, StateStore
from .memory import MemoryStore
from .redis import RedisStore


def build_store(
    redis_url: str | None, *, prefix: str = "omniroute:", clock: Clock = time.time
) -> StateStore:
    """Return a ``RedisStore`` for ``redis_url``, or a ``MemoryStore`` when it is empty.

    ``prefix`` namespaces every Redis key (several deployments may share one server); it is
    irrelevant for the in-process store.
    """
    if redis_url:
        return RedisStore(redis_url, prefix=prefix, clock=clock)
    return MemoryStore(clock=clock)
