"""Shared short-lived state for the resilience layer (breakers, cooldowns, slots, counters).

``MemoryStore`` keeps state in this process (atomic across its threads and event loops);
``RedisStore`` keeps it in Redis (atomic across processes).  ``build_store`` picks one.
"""

from __future__ import annotations

from .base import (
    NOT_READ,
    RESTORING,
    Clock,
    Json,
    NotRead,
    StateStore,
    StoreConflictError,
    StoreRestartedError,
    Updater,
)
from .factory import build_store
from .memory import MemoryStore
from .redis import RedisStore

__all__ = [
    "NOT_READ",
    "RESTORING",
    "Clock",
    "Json",
    "MemoryStore",
    "NotRead",
    "RedisStore",
    "StateStore",
    "StoreConflictError",
    "StoreRestartedError",
    "Updater",
    "build_store",
]
