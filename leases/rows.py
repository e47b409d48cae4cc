"""Row-level reads and writes of the lease table, and the transaction every lease operation runs
in. Only ``leases.services`` calls these.

Two processes must never both win. On SQLite the gateway's transactions are IMMEDIATE (the write
lock is taken at BEGIN), so lease operations simply run one at a time. On PostgreSQL each
operation takes a transaction-scoped advisory lock on its owner (row locks cannot cover rows
that do not exist yet, and two acquires of one owner must not both compute the same next
generation) and locks the rows it reads (``SELECT ... FOR UPDATE``), so a release or a key's
revocation cannot slip between a read and the write that depends on it. The partial unique
indexes (one ACTIVE row per owner, one per connection) are the last line: an insert that loses a
race fails there, and the operation runs again, which answers as if the two had run one after
the other (OWNER_ALREADY_ACTIVE or CONNECTION_BUSY).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F, Max

from leases.domain.leasing import Binding, lease_expiry
from leases.domain.states import EndReason, LeaseState
from leases.models import ACTIVE, ExclusiveConnectionLease

T = TypeVar("T")

# How often an operation that lost a race at the unique indexes (or a PostgreSQL deadlock) runs;
# each run sees the winner's committed row, so the second one normally settles it.
RACE_ATTEMPTS = 3
_ACTIVE_CONFLICTS = (
    "lease_one_active_per_owner",  # PostgreSQL names the index
    "lease_one_active_per_connection",
    "exclusive_connection_leases.lease_owner_hash",  # SQLite names the column
    "exclusive_connection_leases.connection_id",
)
_RETRYABLE_SQLSTATES = {"40P01", "40001"}  # deadlock detected, serialization failure


def run_serialised(operation: Callable[[], T], *, owner_hash: str, now: datetime) -> T:
    """Run ``operation`` in one transaction, after locking the owner and lazy expiry; run it
    again when it lost a race to a concurrent operation."""
    for attempt in range(1, RACE_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                lock_owner(owner_hash)
                expire_stale(now)
                return operation()
        except (IntegrityError, OperationalError) as error:
            if attempt == RACE_ATTEMPTS or not lost_a_race(error):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def lost_a_race(error: Exception) -> bool:
    """An insert beaten by a concurrent ACTIVE row, or a PostgreSQL deadlock between two
    operations: running the operation again settles it. Anything else is a real error."""
    if isinstance(error, IntegrityError):
        return any(name in str(error) for name in _ACTIVE_CONFLICTS)
    return getattr(error.__cause__, "sqlstate", None) in _RETRYABLE_SQLSTATES


def lock_owner(owner_hash: str) -> None:
    """On PostgreSQL, serialise the operations of one owner until the transaction ends."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int(owner_hash[:15], 16)])


def expire_stale(now: datetime) -> int:
    """Lazy expiry: ACTIVE rows whose expiry has passed end EXPIRED (``TTL_EXPIRED``), dated
    at their expiry; the number ended."""
    return ExclusiveConnectionLease.objects.filter(ACTIVE, expires_at__lte=now).update(
        state=LeaseState.EXPIRED.value,
        ended_at=F("expires_at"),
        end_reason=EndReason.TTL_EXPIRED.value,
    )


def owned_row(
    owner_hash: str, *, lock: bool = True, unexpired_at: datetime | None = None
) -> ExclusiveConnectionLease | None:
    """The owner's ACTIVE row (locked for the transaction unless ``lock`` is false; with
    ``unexpired_at``, only if it has not expired by then)."""
    rows = ExclusiveConnectionLease.objects.filter(ACTIVE, lease_owner_hash=owner_hash)
    if unexpired_at is not None:
        rows = rows.filter(expires_at__gt=unexpired_at)
    return (rows.select_for_update() if lock else rows).first()


def holder_row(connection_id: int) -> ExclusiveConnectionLease | None:
    """The ACTIVE row holding ``connection_id``, locked for the transaction."""
    rows = ExclusiveConnectionLease.objects.filter(ACTIVE, connection_id=connection_id)
    return rows.select_for_update().first()


def highest_generation(owner_hash: str) -> int | None:
    """The highest generation the owner ever had, in any state."""
    rows = ExclusiveConnectionLease.objects.filter(lease_owner_hash=owner_hash)
    highest: int | None = rows.aggregate(highest=Max("generation"))["highest"]
    return highest


def latest_of_generation(owner_hash: str, generation: int) -> ExclusiveConnectionLease | None:
    """The newest row of (owner, generation): after fail-overs a generation has several."""
    rows = ExclusiveConnectionLease.objects.filter(
        lease_owner_hash=owner_hash, generation=generation
    )
    return rows.order_by("-id").first()


def binding_of(row: ExclusiveConnectionLease | None) -> Binding | None:
    """What the pure state machine needs of a row."""
    if row is None:
        return None
    return Binding(row.generation, row.api_key_id, row.connection_id)


def insert_row(
    owner_hash: str,
    api_key_id: int,
    provider: str,
    connection_id: int,
    generation: int,
    now: datetime,
    expires_at: datetime,
) -> ExclusiveConnectionLease:
    """A new ACTIVE row, acquired and renewed ``now``."""
    return ExclusiveConnectionLease.objects.create(
        lease_owner_hash=owner_hash,
        api_key_id=api_key_id,
        provider=provider,
        connection_id=connection_id,
        generation=generation,
        state=LeaseState.ACTIVE.value,
        acquired_at=now,
        renewed_at=now,
        expires_at=expires_at,
    )


def refresh_row(
    row: ExclusiveConnectionLease, now: datetime, ttl_ms: int | None, *, provider: str = ""
) -> None:
    """Renewed ``now`` for ``ttl_ms`` (clamped); the provider label follows the latest acquire."""
    row.renewed_at, row.expires_at = now, lease_expiry(now, ttl_ms)
    row.provider = provider or row.provider
    row.save(update_fields=["renewed_at", "expires_at", "provider"])


def end_row(
    row: ExclusiveConnectionLease, state: LeaseState, reason: EndReason, now: datetime
) -> None:
    """The row stops binding: ``state`` with ``reason``, ended ``now``."""
    row.state, row.ended_at, row.end_reason = state.value, now, reason.value
    row.save(update_fields=["state", "ended_at", "end_reason"])


def invalidate_matching(
    *, reason: EndReason, now: datetime, keep: Iterable[int] = (), **match: int
) -> int:
    """End every ACTIVE row matching ``match`` as INVALIDATED, but those on a connection of
    ``keep``; the number ended."""
    found = ExclusiveConnectionLease.objects.filter(ACTIVE, **match)
    return found.exclude(connection_id__in=list(keep)).update(
        state=LeaseState.INVALIDATED.value, ended_at=now, end_reason=reason.value
    )
