"""What the lifecycle API does for each action.

Sync (the DRF view calls it on Django's thread); the lease writes go through ``leases.services``,
the connection state is read the way the attempt loop's connection filter reads it (the state
store's record, else the configuration's durable copy), through routing's access. Every refusal
is a ``GatewayError`` with a lease code; an answer never shows the bound connection's id, the
owner or the key.

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

from leases.access import KeyRouting, LeaseCandidate, routing_access
from leases.domain.actions import lifecycle_body, status_body
from leases.domain.claims import LeaseKey, capacity_error, foreign_holds
from leases.domain.errors import LeaseCode, lease_error
from leases.domain.states import EndReason, LeaseOutcome
from leases.selectors import lease_active, lease_occupancy, lease_status
from leases.services import LeaseResult, LeaseView, lease_acquire, lease_release, lease_renew
from omniroute.core.state import get_store

GRANTED = frozenset({LeaseOutcome.ACQUIRED, LeaseOutcome.REUSED})
OTHER_KEY = "This lease owner holds its lease through another API key; the binding is unchanged."
OTHER_CONNECTION = (
    "This lease owner's active lease binds a connection that cannot serve this model; release "
    "it before acquiring another."
)


def lease_lifecycle_acquire(
    *, routing: KeyRouting, owner: str, model: str, now: datetime
) -> dict[str, Any]:
    """Bind the owner to a connection serving ``model`` (or give its lease back)."""
    key = routing.key
    candidates = routing.candidates(model)
    if not candidates:
        raise lease_error(LeaseCode.NO_ELIGIBLE_CONNECTION)
    active = lease_active(owner_hash=owner, now=now)
    if active is not None:
        return lifecycle_body(_reacquire(active, key, candidates, now))
    eligible = _eligible(candidates)
    held = foreign_holds(lease_occupancy(now=now), owner)
    for candidate in eligible:
        if candidate.connection_id in held:
            continue
        result = _acquire(owner, key, candidate, now)
        if result.outcome in GRANTED and result.lease is not None:
            return lifecycle_body(result.lease)
        if result.outcome is not LeaseOutcome.CONNECTION_BUSY:  # a concurrent acquire won
            raise lease_error(LeaseCode.CONNECTION_MISMATCH, OTHER_CONNECTION)
        held[candidate.connection_id] = result.retry_after or now  # taken since the read: next
    raise capacity_error(_connections(eligible), held, now)


def _acquire(owner: str, key: LeaseKey, candidate: LeaseCandidate, now: datetime) -> LeaseResult:
    return lease_acquire(
        owner_hash=owner,
        api_key_id=key.id,
        provider=candidate.provider,
        connection_id=candidate.connection_id,
        now=now,
    )


def _reacquire(
    active: LeaseView, key: LeaseKey, candidates: Sequence[LeaseCandidate], now: datetime
) -> LeaseView:
    """The owner's lease again (REUSED), when it is this key's and binds a candidate."""
    if active.api_key_id != key.id:
        raise lease_error(LeaseCode.FENCE_STALE, OTHER_KEY)
    candidate = next((c for c in candidates if c.connection_id == active.connection_id), None)
    if candidate is None:
        raise lease_error(LeaseCode.CONNECTION_MISMATCH, OTHER_CONNECTION)
    result = _acquire(active.owner_hash, key, candidate, now)
    if result.outcome not in GRANTED or result.lease is None:  # it ended meanwhile: try again
        raise lease_error(LeaseCode.FENCE_STALE)
    return result.lease


def _eligible(candidates: Sequence[LeaseCandidate]) -> tuple[LeaseCandidate, ...]:
    """The candidates whose connection is neither terminal nor cooling down, as the attempt
    loop's connection filter sees them; 429 ``LEASE_ELIGIBILITY_UNAVAILABLE`` when there is
    none."""
    durable = {c.connection_id: c.state for c in candidates}
    states = routing_access().connection_states(durable)
    clock = get_store().clock()
    usable = tuple(
        c
        for c in candidates
        if not states[c.connection_id].is_terminal and states[c.connection_id].remaining(clock) <= 0
    )
    if usable:
        return usable
    waits = [s.remaining(clock) for s in states.values() if not s.is_terminal]
    retry_after = max(1, ceil(min(waits))) if waits else None
    raise lease_error(LeaseCode.ELIGIBILITY_UNAVAILABLE, retry_after=retry_after)


def _connections(candidates: Sequence[LeaseCandidate]) -> tuple[int, ...]:
    """The connections of ``candidates``, each once, in order."""
    return tuple(dict.fromkeys(c.connection_id for c in candidates))


def lease_lifecycle_status(
    *, routing: KeyRouting, owner: str, generation: int, now: datetime
) -> dict[str, Any]:
    """The owner's active lease of exactly this generation and key, with its connection's
    display names; 409 ``LEASE_FENCE_STALE`` for anything else, all alike."""
    key_id = routing.key.id
    view = lease_status(owner_hash=owner, generation=generation, api_key_id=key_id, now=now)
    if view is None:
        raise lease_error(LeaseCode.FENCE_STALE)
    name, provider = routing.display_names(view.provider, view.connection_id)
    return status_body(view, name, provider)


def lease_lifecycle_renew(
    *, key: LeaseKey, owner: str, generation: int, now: datetime
) -> dict[str, Any]:
    """Extend the owner's lease by the default TTL from ``now``."""
    result = lease_renew(owner_hash=owner, generation=generation, api_key_id=key.id, now=now)
    return _answer(result, LeaseOutcome.RENEWED)


def lease_lifecycle_release(
    *, key: LeaseKey, owner: str, generation: int, reason: EndReason, now: datetime
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
