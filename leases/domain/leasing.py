"""The lease state machine's decisions and its time arithmetic.

The services read the rows, ask these functions what to do and persist the answer. Only ACTIVE
rows bind, and each operation runs after lazy expiry, so "the owner's lease" below is always an
unexpired ACTIVE row.

- acquire: the owner already holds this key and connection → REUSED (same generation, TTL
  refreshed); holds anything else → OWNER_ALREADY_ACTIVE (no rebinding); the connection is held
  → CONNECTION_BUSY; else a new row with the next generation → ACQUIRED.
- transition (fail-over to another connection): the owner's lease must match the generation and
  key, else STALE; the same connection → REUSED; a held connection → CONNECTION_BUSY; else the
  old row is INVALIDATED and a new one keeps the generation → TRANSITIONED.
- renew / invalidate: exact generation and key → RENEWED / INVALIDATED, else STALE.
- release: exact generation and key → RELEASED; the same release repeated (the latest row of
  that generation already RELEASED under the same key) → RELEASED again; else STALE.
- fence: no lease → REQUIRED; another generation → STALE; another key →
  AUTHORIZATION_MISMATCH; another connection → CONNECTION_MISMATCH; else VALID.

Generations only grow: a new lease takes one more than the owner's highest generation ever, so a
generation that once ended can never become valid again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from leases.domain.states import LeaseOutcome, LeaseState
from leases.domain.tokens import clamp_ttl_ms


@dataclass(frozen=True, slots=True)
class Binding:
    """What the state machine needs to know of an owner's ACTIVE lease."""

    generation: int
    api_key_id: int
    connection_id: int


def lease_expiry(now: datetime, ttl_ms: int | None) -> datetime:
    """When a lease taken or renewed at ``now`` for ``ttl_ms`` (clamped) ends."""
    return now + timedelta(milliseconds=clamp_ttl_ms(ttl_ms))


def is_expired(expires_at: datetime, now: datetime) -> bool:
    """A lease is over from its expiry instant on (``expires_at <= now``)."""
    return expires_at <= now


def next_generation(highest: int | None) -> int:
    """The generation of an owner's next lease: one more than any it ever had, 1 at first."""
    return (highest or 0) + 1


def acquire_outcome(
    *, owned: Binding | None, connection_held: bool, api_key_id: int, connection_id: int
) -> LeaseOutcome:
    """What an acquire does, given the owner's lease and whether the connection is held."""
    if owned is not None:
        same = owned.api_key_id == api_key_id and owned.connection_id == connection_id
        return LeaseOutcome.REUSED if same else LeaseOutcome.OWNER_ALREADY_ACTIVE
    return LeaseOutcome.CONNECTION_BUSY if connection_held else LeaseOutcome.ACQUIRED


def holds(owned: Binding | None, *, generation: int, api_key_id: int) -> bool:
    """Whether the owner's lease is exactly this generation under this key."""
    return owned is not None and owned.generation == generation and owned.api_key_id == api_key_id


def transition_outcome(
    *,
    owned: Binding | None,
    generation: int,
    api_key_id: int,
    connection_id: int,
    connection_held: bool,
) -> LeaseOutcome:
    """What a fail-over of the owner's lease to ``connection_id`` does.

    ``connection_held`` means held by another owner's lease (the owner's own binding is the
    REUSED case)."""
    if owned is None or not holds(owned, generation=generation, api_key_id=api_key_id):
        return LeaseOutcome.STALE
    if owned.connection_id == connection_id:
        return LeaseOutcome.REUSED
    return LeaseOutcome.CONNECTION_BUSY if connection_held else LeaseOutcome.TRANSITIONED


def release_repeats(
    latest_state: LeaseState | None, latest_api_key_id: int | None, *, api_key_id: int
) -> bool:
    """Whether a release that found no matching ACTIVE lease repeats one that succeeded: the
    latest row of that (owner, generation) is RELEASED under the same key."""
    return latest_state == LeaseState.RELEASED and latest_api_key_id == api_key_id


def fence_outcome(
    *, owned: Binding | None, generation: int, api_key_id: int, connection_id: int
) -> LeaseOutcome:
    """Whether a request may go to ``connection_id`` under this owner's lease, checked right
    before each upstream attempt."""
    if owned is None:
        return LeaseOutcome.REQUIRED
    if owned.generation != generation:
        return LeaseOutcome.STALE
    if owned.api_key_id != api_key_id:
        return LeaseOutcome.AUTHORIZATION_MISMATCH
    if owned.connection_id != connection_id:
        return LeaseOutcome.CONNECTION_MISMATCH
    return LeaseOutcome.VALID
