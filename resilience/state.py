"""The process-wide state store, chosen by settings (memory unless ``REDIS_URL`` is set)."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from resilience.store import StateStore, build_store


@cache
def get_store() -> StateStore:
    """The one state store of this process."""
    return build_store(settings.REDIS_URL, prefix=settings.REDIS_PREFIX)


def store_is_shared() -> bool:
    """Whether other processes see this store (Redis) or only this one (memory)."""
    return bool(settings.REDIS_URL)
