"""How much each lease is used: the managed requests bound under it, and when the latest began.

The lease binding notes each managed request (``leases.managed.lease_binding``); ``GET
/api/sessions`` reads the notes. They live in the state store, one record per lease row,
``{"count", "last"}``, kept a day past the latest request: nothing here is worth a database
write on the request path. A lease that moved to another connection (a fail-over) is a new
row, so its count starts again there.

The gateway does not tell leases when a request ends, so "active" means that a request began
on the lease within :data:`ACTIVE_WINDOW_SECONDS` (docs/operating.md, "The management API").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from omniroute.core.state import get_store
from omniroute.core.store import Json, StateStore

ACTIVITY_PREFIX = "lease-activity:"
ACTIVITY_KEEP_SECONDS = 24 * 3600.0
ACTIVE_WINDOW_SECONDS = 30.0
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseActivity:
    """The requests bound under one lease and when the latest began (epoch seconds)."""

    request_count: int = 0
    last_request_at: float | None = None

    def active(self, now: float) -> bool:
        """Whether a request began within :data:`ACTIVE_WINDOW_SECONDS` of ``now``."""
        last = self.last_request_at
        return last is not None and now - last < ACTIVE_WINDOW_SECONDS


@dataclass(frozen=True, slots=True)
class LeaseUse:
    """What the sessions list shows of a lease's activity, as of the store's clock."""

    request_count: int
    active: bool


def activity_key(lease_id: int) -> str:
    return f"{ACTIVITY_PREFIX}{lease_id}"


def _activity(raw: Json | None) -> LeaseActivity:
    if not isinstance(raw, dict):
        return LeaseActivity()
    count, last = raw.get("count"), raw.get("last")
    return LeaseActivity(
        count if isinstance(count, int) else 0,
        float(last) if isinstance(last, int | float) else None,
    )


async def lease_activity_note(*, lease_id: int, store: StateStore | None = None) -> None:
    """Count one managed request on lease ``lease_id``, begun now. Never raises: a request is
    not refused because its count could not be kept."""
    store = store or get_store()
    now = store.clock()

    def noted(raw: Json | None) -> Json:
        return {"count": _activity(raw).request_count + 1, "last": now}

    try:
        await store.update(activity_key(lease_id), noted, ttl=ACTIVITY_KEEP_SECONDS)
    except Exception:
        logger.exception("the activity of lease %s could not be noted", lease_id)


async def lease_activity_read(
    *, lease_ids: Iterable[int], store: StateStore | None = None
) -> dict[int, LeaseUse]:
    """The use of each lease in ``lease_ids`` now (none noted: zero requests, not active)."""
    store = store or get_store()
    now = store.clock()
    found: dict[int, LeaseUse] = {}
    for lease_id in lease_ids:
        activity = _activity(await store.get(activity_key(lease_id)))
        found[lease_id] = LeaseUse(activity.request_count, activity.active(now))
    return found
