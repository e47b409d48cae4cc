"""What the lifecycle API does for each action (reference-part2 §2.7 steps 8 to 10, §2.9).

Sync (the DRF view calls it on Django's thread); the lease writes go through ``leases.services``,
the connection state is read the way the attempt loop's connection filter reads it (the state
store's record, else the snapshot's durable copy). Every refusal is a ``GatewayError`` with a
lease code; an answer never shows the bound connection's id, the owner or the key.

Acquire runs the model's ordinary plan for this key (so only the connections the key may use),
then: an owner that already holds a lease gets it back (REUSED, same generation) when it binds
one of those connections, and 409 otherwise; else the first connection that is neither cooling
down, terminal nor held by another owner is bound (ACQUIRED, the next generation). When every
eligible connection is held by other owners, 429 says when the first of them frees up.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from math import ceil
from typing import Any

from leases.domain.states import EndReason, LeaseOutcome
from leases.selectors import lease_active, lease_occupancy, lease_status
from leases.services import LeaseResult, LeaseView, lease_acquire, lease_release, lease_renew
from resilience.state import get_store
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.lease_actions import lifecycle_body, status_body
from routing.domain.lease_errors import LeaseCode, lease_error
from routing.domain.lease_routing import (
    acquire_candidates,
    capacity_error,
    distinct_connections,
    foreign_holds,
)
from routing.domain.planning import Target
from routing.selectors import connection_names, connection_states_over

GRANTED = frozenset({LeaseOutcome.ACQUIRED, LeaseOutcome.REUSED})
OTHER_KEY = "This lease owner holds its lease through another API key; the binding is unchanged."
OTHER_CONNECTION = (
    "This lease owner's active lease binds a connection that cannot serve this model; release "
    "it before acquiring another."
)


def lease_lifecycle_acquire(
    *, snapshot: ConfigSnapshot, key: KeyInfo, owner: str, model: str, now: datetime
) -> dict[str, Any]:
    """Bind the owner to a connection serving ``model`` (or give its lease back)."""
    targets = acquire_candidates(snapshot, key, model)
    if not targets:
        raise lease_error(LeaseCode.NO_ELIGIBLE_CONNECTION)
    active = lease_active(owner_hash=owner, now=now)
    if active is not None:
        return lifecycle_body(_reacquire(active, key, targets, now))
    eligible = _eligible(targets)
    held = foreign_holds(lease_occupancy(now=now), owner)
    for target in eligible:
        if target.connection.id in held:
            continue
        result = _acquire(owner, key, target, now)
        if result.outcome in GRANTED and result.lease is not None:
            return lifecycle_body(result.lease)
        if result.outcome is not LeaseOutcome.CONNECTION_BUSY:  # a concurrent acquire won
            raise lease_error(LeaseCode.CONNECTION_MISMATCH, OTHER_CONNECTION)
        held[target.connection.id] = result.retry_after or now  # taken since the read: next
    raise capacity_error(distinct_connections(eligible), held, now)


def _acquire(owner: str, key: KeyInfo, target: Target, now: datetime) -> LeaseResult:
    return lease_acquire(
        owner_hash=owner, api_key_id=key.id, provider=target.provider.slug,
        connection_id=target.connection.id, now=now,
    )  # fmt: skip


def _reacquire(
    active: LeaseView, key: KeyInfo, targets: Sequence[Target], now: datetime
) -> LeaseView:
    """The owner's lease again (REUSED), when it is this key's and binds a candidate."""
    if active.api_key_id != key.id:
        raise lease_error(LeaseCode.FENCE_STALE, OTHER_KEY)
    target = next((t for t in targets if t.connection.id == active.connection_id), None)
    if target is None:
        raise lease_error(LeaseCode.CONNECTION_MISMATCH, OTHER_CONNECTION)
    result = _acquire(active.owner_hash, key, target, now)
    if result.outcome not in GRANTED or result.lease is None:  # it ended meanwhile: try again
        raise lease_error(LeaseCode.FENCE_STALE)
    return result.lease


def _eligible(targets: Sequence[Target]) -> tuple[Target, ...]:
    """The targets whose connection is neither terminal nor cooling down, as the attempt loop's
    connection filter sees them; 429 ``LEASE_ELIGIBILITY_UNAVAILABLE`` when there is none."""
    states = connection_states_over({t.connection.id: t.connection.state for t in targets})
    clock = get_store().clock()
    usable = tuple(
        t for t in targets
        if not states[t.connection.id].is_terminal and states[t.connection.id].remaining(clock) <= 0
    )  # fmt: skip
    if usable:
        return usable
    waits = [s.remaining(clock) for s in states.values() if not s.is_terminal]
    retry_after = max(1, ceil(min(waits))) if waits else None
    raise lease_error(LeaseCode.ELIGIBILITY_UNAVAILABLE, retry_after=retry_after)


def lease_lifecycle_status(
    *, snapshot: ConfigSnapshot, key: KeyInfo, owner: str, generation: int, now: datetime
) -> dict[str, Any]:
    """The owner's active lease of exactly this generation and key, with its connection's
    display names; 409 ``LEASE_FENCE_STALE`` for anything else, all alike."""
    view = lease_status(owner_hash=owner, generation=generation, api_key_id=key.id, now=now)
    if view is None:
        raise lease_error(LeaseCode.FENCE_STALE)
    return status_body(view, _connection_name(snapshot, view), _provider_name(snapshot, view))


def _connection_name(snapshot: ConfigSnapshot, view: LeaseView) -> str | None:
    for connection in snapshot.connections_for(view.provider):
        if connection.id == view.connection_id:
            return connection.name
    return connection_names([view.connection_id]).get(view.connection_id)  # an inactive one


def _provider_name(snapshot: ConfigSnapshot, view: LeaseView) -> str:
    provider = snapshot.providers.get(view.provider)
    return provider.name if provider is not None else view.provider


def lease_lifecycle_renew(
    *, key: KeyInfo, owner: str, generation: int, now: datetime
) -> dict[str, Any]:
    """Extend the owner's lease by the default TTL from ``now``."""
    result = lease_renew(owner_hash=owner, generation=generation, api_key_id=key.id, now=now)
    return _answer(result, LeaseOutcome.RENEWED)


def lease_lifecycle_release(
    *, key: KeyInfo, owner: str, generation: int, reason: EndReason, now: datetime
) -> dict[str, Any]:
    """End the owner's lease (idempotent for the same generation and key)."""
    result = lease_release(
        owner_hash=owner, generation=generation, api_key_id=key.id, reason=reason, now=now
    )
    return _answer(result, LeaseOutcome.RELEASED)


def _answer(result: LeaseResult, expected: LeaseOutcome) -> dict[str, Any]:
    if result.outcome is not expected or result.lease is None:
        raise lease_error(LeaseCode.FENCE_STALE)
    return lifecycle_body(result.lease)
