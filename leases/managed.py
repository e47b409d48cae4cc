"""Managed inference requests against the lease table.

The checks are pure (``leases.domain.claims``); this module reads and writes the leases for
them. It runs only for keys with ``lease:exclusive``: an ordinary request never reaches it, so
the hot path stays free of database queries. Each read or write is one hop through
``db_sync_to_async``; a database failure answers 503 ``LEASE_SERVICE_UNAVAILABLE``, never an
upstream call.

The proxy's own request context stays routing's: routing hands in the plan's targets and gets
them back narrowed (:func:`lease_binding`), and reorders them with ``leased_targets``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime

from django.db import DatabaseError

from leases.activity import lease_activity_note
from leases.domain.claims import (
    LeaseClaim,
    TargetT,
    capacity_error,
    check_active,
    distinct_connections,
    foreign_holds,
    leased_targets,
)
from leases.domain.errors import LeaseCode, lease_error
from leases.domain.states import EndReason, LeaseOutcome
from leases.selectors import lease_active, lease_occupancy
from leases.services import LeaseResult, LeaseView, lease_fence, lease_transition
from omniroute.core.db import db_sync_to_async

logger = logging.getLogger(__name__)

Occupancy = dict[int, tuple[str, datetime]]


def lease_read(*, owner_hash: str, now: datetime) -> tuple[LeaseView | None, Occupancy]:
    """The owner's active lease and every connection's active holder, in one bridge call."""
    return lease_active(owner_hash=owner_hash, now=now), lease_occupancy(now=now)


async def lease_binding(
    claim: LeaseClaim,
    targets: Sequence[TargetT],
    *,
    pinned: Collection[int],
    now: datetime,
    request_id: str,
) -> tuple[TargetT, ...]:
    """Check a managed request's lease and narrow its ``targets`` to the bound connection's,
    then those of the connections no other owner holds; ``claim`` learns its binding, and the
    lease counts one more request (``leases.activity``). From now on the lease is fenced before
    each attempt."""
    try:
        active, occupancy = await db_sync_to_async(lease_read)(owner_hash=claim.owner_hash, now=now)
    except DatabaseError:
        logger.exception("request %s: the lease could not be read", request_id)
        raise lease_error(LeaseCode.SERVICE_UNAVAILABLE) from None
    binding = check_active(claim, active, pinned)
    held = foreign_holds(occupancy, claim.owner_hash)
    leased = leased_targets(targets, binding, held)
    if not leased:
        raise capacity_error(distinct_connections(targets), held, now)
    claim.connection_id = binding
    assert active is not None  # check_active raised without one
    await lease_activity_note(lease_id=active.id)
    return leased


def lease_fence_or_move(
    *, claim: LeaseClaim, connection_id: int, provider: str, reason: EndReason, now: datetime
) -> LeaseResult:
    """The fence right before an attempt on ``connection_id``; when the lease binds another
    connection (the binding could not serve), the lease moves here first, same generation."""
    fenced = lease_fence(
        owner_hash=claim.owner_hash,
        generation=claim.generation,
        api_key_id=claim.key_id,
        connection_id=connection_id,
        now=now,
    )
    if fenced.outcome is not LeaseOutcome.CONNECTION_MISMATCH:
        return fenced
    return lease_transition(
        owner_hash=claim.owner_hash,
        generation=claim.generation,
        api_key_id=claim.key_id,
        provider=provider,
        connection_id=connection_id,
        reason=reason,
        now=now,
    )
