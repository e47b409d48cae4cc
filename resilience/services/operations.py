"""Breaker operations for sync callers (admin, DRF views) and the health payload.

Each function runs its async work to completion on the gateway's event loop (or a temporary
one outside a server) and waits for the write-through, so a response or admin message never
reports a change the database does not hold yet.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from asgiref.sync import async_to_sync

from omniroute.core import tasks
from omniroute.core.db import db_sync_to_async
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import BreakerPolicy, BreakerState
from resilience.persistence import persisted_breakers
from resilience.services.breakers import (
    breaker_forget,
    breaker_list,
    breaker_reset,
    breaker_reset_all,
    breaker_restore,
)
from resilience.services.housekeeping import resilience_ready


async def _reset(store: StateStore, names: list[str] | None, forget: bool) -> int:
    # Breakers only in the database (the store lost them) are reset too: load them first.
    rows = await db_sync_to_async(persisted_breakers)()
    await breaker_restore(store=store, rows=rows)
    if names is None:
        count = await breaker_reset_all(store=store, forget=forget)
    else:
        for name in names:
            if forget:
                await breaker_forget(store=store, name=name)
            else:
                await breaker_reset(store=store, name=name)
        count = len(names)
    await tasks.flush()
    return count


def breakers_reset(*, names: list[str] | None = None, forget: bool = False) -> int:
    """Reset the named breakers (all when ``None``); ``forget`` also drops records and rows."""
    return int(async_to_sync(_reset)(get_store(), names, forget))


async def breaker_statuses(
    *, store: StateStore, policies: dict[str, BreakerPolicy], default: BreakerPolicy
) -> list[dict[str, Any]]:
    """Every breaker's status object, by provider name."""
    await resilience_ready(store, chores=False)
    now = store.clock()
    breakers = await breaker_list(store=store)
    return [
        {"name": name, **breaker.status(policies.get(name, default), now)}
        for name, breaker in sorted(breakers.items())
    ]


def health_status(statuses: list[dict[str, Any]]) -> str:
    """``degraded`` while any provider breaker is not closed, else ``ok``."""
    healthy = {BreakerState.CLOSED.value, BreakerState.DEGRADED.value}
    return "ok" if all(s["state"] in healthy for s in statuses) else "degraded"


def timestamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.UTC).isoformat()
