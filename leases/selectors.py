"""Reads of the lease table. They never write: an expired row still marked ACTIVE is simply not
counted (the next lease operation marks it EXPIRED)."""

from __future__ import annotations

from datetime import datetime

from leases.models import ACTIVE, ExclusiveConnectionLease
from leases.records import LeaseView, check_owner_hash, lease_view, resolve_now

__all__ = [
    "LeaseView",
    "lease_active",
    "lease_list_active",
    "lease_list_sessions",
    "lease_occupancy",
    "lease_on_connection",
    "lease_status",
]


def lease_active(*, owner_hash: str, now: datetime | None = None) -> LeaseView | None:
    """The owner's ACTIVE, unexpired lease, or None."""
    row = (
        ExclusiveConnectionLease.objects.filter(
            ACTIVE, lease_owner_hash=check_owner_hash(owner_hash)
        )
        .filter(expires_at__gt=resolve_now(now))
        .first()
    )
    return lease_view(row) if row is not None else None


def lease_status(
    *, owner_hash: str, generation: int, api_key_id: int, now: datetime | None = None
) -> LeaseView | None:
    """The owner's lease if it is active under exactly this generation and key, else None: a
    wrong key, owner or generation and an ended lease all look the same."""
    view = lease_active(owner_hash=owner_hash, now=now)
    if view is None or view.generation != generation or view.api_key_id != api_key_id:
        return None
    return view


def lease_occupancy(*, now: datetime | None = None) -> dict[int, tuple[str, datetime]]:
    """Connection id → (owner hash, expires_at) of every ACTIVE, unexpired lease."""
    rows = ExclusiveConnectionLease.objects.filter(ACTIVE, expires_at__gt=resolve_now(now))
    return {
        connection_id: (owner, expires_at)
        for connection_id, owner, expires_at in rows.values_list(
            "connection_id", "lease_owner_hash", "expires_at"
        )
    }


def lease_list_active(*, now: datetime | None = None, limit: int = 200) -> list[LeaseView]:
    """Every ACTIVE, unexpired lease (at most ``limit``), the one ending soonest first."""
    rows = ExclusiveConnectionLease.objects.filter(ACTIVE, expires_at__gt=resolve_now(now))
    return [lease_view(row) for row in rows.order_by("expires_at", "pk")[:limit]]


def lease_list_sessions(
    *, now: datetime | None = None, provider: str | None = None, connection_id: int | None = None
) -> list[LeaseView]:
    """Every ACTIVE, unexpired lease (of ``provider``, on ``connection_id`` when given), by
    connection: the sessions an operator sees, in an order that stays put between pages."""
    rows = ExclusiveConnectionLease.objects.filter(ACTIVE, expires_at__gt=resolve_now(now))
    if provider is not None:
        rows = rows.filter(provider=provider)
    if connection_id is not None:
        rows = rows.filter(connection_id=connection_id)
    return [lease_view(row) for row in rows.order_by("connection_id", "pk")]


def lease_on_connection(*, connection_id: int, now: datetime | None = None) -> LeaseView | None:
    """The ACTIVE, unexpired lease holding ``connection_id``, or None."""
    found = lease_list_sessions(now=now, connection_id=connection_id)
    return found[0] if found else None
