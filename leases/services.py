"""The one write path of exclusive connection leases (docs/routing.md, "Exclusive leases").

Every operation is one transaction that first marks the ACTIVE rows whose expiry has passed
EXPIRED (``TTL_EXPIRED``): there is no timer, a lease ends the first time anyone looks after
its expiry. The decisions themselves are pure (``leases.domain.leasing``); this module reads
the rows, asks, and persists.

Concurrency (SQLite's IMMEDIATE transactions, PostgreSQL's locks, races lost at the unique
indexes) is handled where the transaction is opened: ``leases.rows.run_serialised``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from leases import rows
from leases.domain.leasing import (
    acquire_outcome,
    fence_outcome,
    holds,
    lease_expiry,
    next_generation,
    release_repeats,
    transition_outcome,
)
from leases.domain.states import RELEASE_REASONS, EndReason, LeaseOutcome, LeaseState
from leases.models import ExclusiveConnectionLease
from leases.records import LeaseView, check_owner_hash, lease_view, resolve_now

__all__ = [
    "LeaseResult",
    "LeaseView",
    "lease_acquire",
    "lease_fence",
    "lease_invalidate",
    "lease_release",
    "lease_renew",
    "lease_transition",
    "leases_expire",
    "leases_invalidate_for_connection",
    "leases_invalidate_for_key",
]


@dataclass(frozen=True)
class LeaseResult:
    """The outcome of one lease operation.

    ``lease`` is the row the outcome is about (the owner's own lease, also for
    OWNER_ALREADY_ACTIVE); ``retry_after`` is the holder's expiry for CONNECTION_BUSY."""

    outcome: LeaseOutcome
    lease: LeaseView | None = None
    retry_after: datetime | None = None


def lease_acquire(
    *,
    owner_hash: str,
    api_key_id: int,
    provider: str,
    connection_id: int,
    ttl_ms: int | None = None,
    now: datetime | None = None,
) -> LeaseResult:
    """Bind the owner to ``connection_id`` for ``ttl_ms`` (clamped): ACQUIRED with the next
    generation, REUSED (same key and connection, TTL refreshed, generation kept),
    OWNER_ALREADY_ACTIVE (never rebound) or CONNECTION_BUSY."""
    check_owner_hash(owner_hash)
    at = resolve_now(now)

    def acquire() -> LeaseResult:
        owned = rows.owned_row(owner_hash)
        holder = None if owned is not None else rows.holder_row(connection_id)
        outcome = acquire_outcome(
            owned=rows.binding_of(owned),
            connection_held=holder is not None,
            api_key_id=api_key_id,
            connection_id=connection_id,
        )
        if owned is not None:
            if outcome is LeaseOutcome.REUSED:
                rows.refresh_row(owned, at, ttl_ms, provider=provider)
            return LeaseResult(outcome, lease_view(owned))
        if holder is not None:
            return LeaseResult(outcome, retry_after=holder.expires_at)
        generation = next_generation(rows.highest_generation(owner_hash))
        expires_at = lease_expiry(at, ttl_ms)
        row = rows.insert_row(
            owner_hash, api_key_id, provider, connection_id, generation, at, expires_at
        )
        return LeaseResult(outcome, lease_view(row))

    return rows.run_serialised(acquire, owner_hash=owner_hash, now=at)


def lease_transition(
    *,
    owner_hash: str,
    generation: int,
    api_key_id: int,
    provider: str,
    connection_id: int,
    reason: EndReason,
    now: datetime | None = None,
) -> LeaseResult:
    """Move the owner's lease to another connection (fail-over): the old row ends INVALIDATED
    with ``reason`` and a new one keeps the generation and the expiry → TRANSITIONED; or
    REUSED (already there), CONNECTION_BUSY, STALE."""
    check_owner_hash(owner_hash)
    end_reason, at = EndReason(reason), resolve_now(now)

    def transition() -> LeaseResult:
        owned = rows.owned_row(owner_hash)
        moving = owned is not None and owned.connection_id != connection_id
        holder = rows.holder_row(connection_id) if moving else None
        outcome = transition_outcome(
            owned=rows.binding_of(owned),
            generation=generation,
            api_key_id=api_key_id,
            connection_id=connection_id,
            connection_held=holder is not None,
        )
        if outcome is LeaseOutcome.STALE or owned is None:
            return LeaseResult(LeaseOutcome.STALE)
        if holder is not None:
            return LeaseResult(outcome, retry_after=holder.expires_at)
        if outcome is LeaseOutcome.REUSED:
            return LeaseResult(outcome, lease_view(owned))
        rows.end_row(owned, LeaseState.INVALIDATED, end_reason, at)
        # A fail-over neither extends nor shortens the lease: the new row keeps the expiry.
        generation_kept, expires_at = owned.generation, owned.expires_at
        row = rows.insert_row(
            owner_hash, api_key_id, provider, connection_id, generation_kept, at, expires_at
        )
        return LeaseResult(outcome, lease_view(row))

    return rows.run_serialised(transition, owner_hash=owner_hash, now=at)


def lease_renew(
    *,
    owner_hash: str,
    generation: int,
    api_key_id: int,
    ttl_ms: int | None = None,
    now: datetime | None = None,
) -> LeaseResult:
    """Extend the owner's lease by ``ttl_ms`` (clamped) from ``now`` → RENEWED, when it is
    ACTIVE under exactly this generation and key; STALE otherwise. The generation never
    changes."""
    check_owner_hash(owner_hash)
    at = resolve_now(now)

    def renew() -> LeaseResult:
        owned = _held(owner_hash, generation=generation, api_key_id=api_key_id)
        if owned is None:
            return LeaseResult(LeaseOutcome.STALE)
        rows.refresh_row(owned, at, ttl_ms)
        return LeaseResult(LeaseOutcome.RENEWED, lease_view(owned))

    return rows.run_serialised(renew, owner_hash=owner_hash, now=at)


def lease_release(
    *,
    owner_hash: str,
    generation: int,
    api_key_id: int,
    reason: EndReason = EndReason.OWNER_EXIT,
    now: datetime | None = None,
) -> LeaseResult:
    """End the owner's lease as RELEASED (``OWNER_EXIT`` or ``CLIENT_CANCELLED``). Idempotent:
    releasing the same generation again under the same key answers RELEASED again; anything
    else is STALE."""
    check_owner_hash(owner_hash)
    end_reason, at = EndReason(reason), resolve_now(now)
    if end_reason not in RELEASE_REASONS:
        raise ValueError(f"a release ends with OWNER_EXIT or CLIENT_CANCELLED, not {end_reason}")

    def release() -> LeaseResult:
        owned = _held(owner_hash, generation=generation, api_key_id=api_key_id)
        if owned is not None:
            rows.end_row(owned, LeaseState.RELEASED, end_reason, at)
            return LeaseResult(LeaseOutcome.RELEASED, lease_view(owned))
        latest = rows.latest_of_generation(owner_hash, generation)
        state = LeaseState(latest.state) if latest is not None else None
        key = latest.api_key_id if latest is not None else None
        if latest is not None and release_repeats(state, key, api_key_id=api_key_id):
            return LeaseResult(LeaseOutcome.RELEASED, lease_view(latest))
        return LeaseResult(LeaseOutcome.STALE)

    return rows.run_serialised(release, owner_hash=owner_hash, now=at)


def lease_invalidate(
    *,
    owner_hash: str,
    generation: int,
    api_key_id: int,
    reason: EndReason,
    now: datetime | None = None,
    lease_id: int | None = None,
) -> LeaseResult:
    """End the owner's lease as INVALIDATED with ``reason`` (the gateway's or an operator's
    decision, e.g. the admin's "revoke") when it is ACTIVE under exactly this generation and
    key → INVALIDATED; STALE otherwise. An operator names the row (``lease_id``): a fail-over
    keeps the generation, so without it an ended row's owner, generation and key would name
    the owner's live lease on another connection."""
    check_owner_hash(owner_hash)
    end_reason, at = EndReason(reason), resolve_now(now)

    def invalidate() -> LeaseResult:
        owned = _held(owner_hash, generation=generation, api_key_id=api_key_id)
        if owned is None or (lease_id is not None and owned.pk != lease_id):
            return LeaseResult(LeaseOutcome.STALE)
        rows.end_row(owned, LeaseState.INVALIDATED, end_reason, at)
        return LeaseResult(LeaseOutcome.INVALIDATED, lease_view(owned))

    return rows.run_serialised(invalidate, owner_hash=owner_hash, now=at)


def lease_fence(
    *,
    owner_hash: str,
    generation: int,
    api_key_id: int,
    connection_id: int,
    now: datetime | None = None,
) -> LeaseResult:
    """Check, right before an upstream attempt, that this owner's lease still covers the
    request: VALID, or REQUIRED, STALE, AUTHORIZATION_MISMATCH, CONNECTION_MISMATCH. A plain
    read (an expired row counts as none), not a write: it runs before every attempt of a
    managed request, and the write lock of lazy expiry belongs to the lease operations."""
    check_owner_hash(owner_hash)
    at = resolve_now(now)
    owned = rows.owned_row(owner_hash, lock=False, unexpired_at=at)
    outcome = fence_outcome(
        owned=rows.binding_of(owned),
        generation=generation,
        api_key_id=api_key_id,
        connection_id=connection_id,
    )
    # The binding goes back only to its holder (right key and generation).
    own = outcome in (LeaseOutcome.VALID, LeaseOutcome.CONNECTION_MISMATCH)
    return LeaseResult(outcome, lease_view(owned) if own and owned is not None else None)


def leases_expire(*, now: datetime | None = None) -> int:
    """Mark every ACTIVE lease whose expiry has passed EXPIRED; the number marked. The lease
    operations do this first anyway; this is the same reconciliation for start-up or a chore."""
    at = resolve_now(now)
    with transaction.atomic():
        return rows.expire_stale(at)


def leases_invalidate_for_key(
    *,
    api_key_id: int,
    reason: EndReason = EndReason.MANAGED_KEY_REVOKED,
    now: datetime | None = None,
    keep: Iterable[int] = (),
) -> int:
    """End every ACTIVE lease held through ``api_key_id`` (the key was revoked, deactivated,
    deleted or lost its lease scope), but those on a connection of ``keep`` (the ones its
    allow-list still names); the number ended."""
    return _invalidate_where(api_key_id=api_key_id, reason=reason, now=now, keep=keep)


def leases_invalidate_for_connection(
    *,
    connection_id: int,
    reason: EndReason = EndReason.CONNECTION_INELIGIBLE,
    now: datetime | None = None,
) -> int:
    """End the ACTIVE lease on ``connection_id`` (the connection was deleted or disabled); the
    number ended (0 or 1)."""
    return _invalidate_where(connection_id=connection_id, reason=reason, now=now)


def _held(owner_hash: str, *, generation: int, api_key_id: int) -> ExclusiveConnectionLease | None:
    """The owner's ACTIVE row (locked) if it is exactly this generation under this key."""
    owned = rows.owned_row(owner_hash)
    binding = rows.binding_of(owned)
    return owned if holds(binding, generation=generation, api_key_id=api_key_id) else None


def _invalidate_where(
    *, reason: EndReason, now: datetime | None, keep: Iterable[int] = (), **match: int
) -> int:
    end_reason, at = EndReason(reason), resolve_now(now)
    with transaction.atomic():
        rows.expire_stale(at)
        return rows.invalidate_matching(reason=end_reason, now=at, keep=keep, **match)
