"""The plain data that lease services and selectors hand out: frozen views of lease rows, never
model instances (nothing lazy may reach async callers), and the clock at the edge."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from leases.domain.states import EndReason, LeaseState
from leases.models import ExclusiveConnectionLease

_OWNER_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class LeaseView:
    """One lease row as plain data. ``owner_hash`` is the SHA-256 of the owner token, and with
    ``api_key_id`` and ``connection_id`` is for the gateway's own decisions: never echo them to
    a client."""

    id: int
    owner_hash: str
    api_key_id: int
    provider: str
    connection_id: int
    generation: int
    state: LeaseState
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: EndReason | None


def lease_view(row: ExclusiveConnectionLease) -> LeaseView:
    """The frozen view of one row."""
    return LeaseView(
        id=row.pk,
        owner_hash=row.lease_owner_hash,
        api_key_id=row.api_key_id,
        provider=row.provider,
        connection_id=row.connection_id,
        generation=row.generation,
        state=LeaseState(row.state),
        acquired_at=row.acquired_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
        ended_at=row.ended_at,
        end_reason=EndReason(row.end_reason) if row.end_reason else None,
    )


def resolve_now(now: datetime | None) -> datetime:
    """``now`` as given (it must be timezone-aware), or the current time."""
    if now is None:
        return timezone.now()
    if timezone.is_naive(now):
        raise ValueError("lease operations need a timezone-aware 'now'")
    return now


def check_owner_hash(owner_hash: str) -> str:
    """``owner_hash`` if it is a SHA-256 in lowercase hex; a raw owner token (or anything else)
    is refused before it can reach a query, let alone the database."""
    if not isinstance(owner_hash, str) or _OWNER_HASH.fullmatch(owner_hash) is None:
        raise ValueError("owner_hash must be the SHA-256 of the owner token (64 lowercase hex)")
    return owner_hash
