"""The process-wide state store, chosen by settings (memory unless ``REDIS_URL`` is set).

With Redis, the store is a ``ResilientStore``: every call is bounded by ``STORE_TIMEOUT_MS``
and an unreachable Redis is replaced by process-local state instead of failing the request.
``store_backend`` and ``store_degraded_*`` describe it for health.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings

from omniroute.core.store import RedisStore, StateStore, build_store
from omniroute.core.store.resilient import ResilientStore


@cache
def get_store() -> StateStore:
    """The one state store of this process."""
    store = build_store(settings.REDIS_URL, prefix=settings.REDIS_PREFIX)
    if isinstance(store, RedisStore):
        return ResilientStore(store, timeout=settings.STORE_TIMEOUT_MS / 1000)
    return store


def store_is_shared() -> bool:
    """Whether other processes see this store (Redis) or only this one (memory)."""
    return bool(settings.REDIS_URL)


def store_backend(store: StateStore) -> str:
    """``redis`` or ``memory``: where ``store`` keeps its state when all is well."""
    primary = store.primary if isinstance(store, ResilientStore) else store
    return "redis" if isinstance(primary, RedisStore) else "memory"


def store_degraded_reason(store: StateStore) -> str | None:
    """Why ``store`` serves from process-local state right now; ``None`` when it does not."""
    if isinstance(store, ResilientStore) and store.degraded:
        return store.degraded_reason or "unknown error"
    return None


def store_degraded_since(store: StateStore) -> float | None:
    """When (``store.clock`` time) ``store`` started serving from process-local state."""
    return store.degraded_since if isinstance(store, ResilientStore) else None
