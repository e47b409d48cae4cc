"""Managed inference requests against the lease table (reference-part2 §2.8).

The checks are pure (``routing.domain.lease_routing``); this module reads and writes the leases
through ``leases`` for them. It runs only for keys with ``lease:exclusive``: an ordinary request
never reaches it, so the hot path stays free of database queries. Each read or write is one hop
through ``db_sync_to_async``; a database failure answers 503 ``LEASE_SERVICE_UNAVAILABLE``, never
an upstream call.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from django.db import DatabaseError

from leases.domain.states import EndReason, LeaseOutcome
from leases.selectors import lease_active, lease_occupancy
from leases.services import LeaseResult, LeaseView, lease_fence, lease_transition
from resilience.db import db_sync_to_async
from routing.attempts import AttemptContext
from routing.domain.lease_errors import LeaseCode, lease_error
from routing.domain.lease_routing import (
    LeaseClaim,
    capacity_error,
    check_active,
    distinct_connections,
    foreign_holds,
    leased_targets,
    pinned_connections,
)

logger = logging.getLogger(__name__)

Occupancy = dict[int, tuple[str, datetime]]


def lease_read(*, owner_hash: str, now: datetime) -> tuple[LeaseView | None, Occupancy]:
    """The owner's active lease and every connection's active holder, in one bridge call."""
    return lease_active(owner_hash=owner_hash, now=now), lease_occupancy(now=now)


async def lease_bind(context: AttemptContext, claim: LeaseClaim, now: datetime) -> None:
    """Check a managed request's lease and narrow its plan to the bound connection, then the
    connections no other owner holds; from now on the lease is fenced before each attempt."""
    try:
        active, occupancy = await db_sync_to_async(lease_read)(owner_hash=claim.owner_hash, now=now)
    except DatabaseError:
        logger.exception("request %s: the lease could not be read", context.request_id)
        raise lease_error(LeaseCode.SERVICE_UNAVAILABLE) from None
    pinned = pinned_connections(context.snapshot, context.plan)
    binding = check_active(claim, active, pinned)
    held = foreign_holds(occupancy, claim.owner_hash)
    targets = leased_targets(context.plan.targets, binding, held)
    if not targets:
        raise capacity_error(distinct_connections(context.plan.targets), held, now)
    context.plan = replace(context.plan, targets=targets)
    claim.connection_id = binding
    context.lease = claim


def lease_fence_or_move(
    *, claim: LeaseClaim, connection_id: int, provider: str, reason: EndReason, now: datetime
) -> LeaseResult:
    """The fence right before an attempt on ``connection_id``; when the lease binds another
    connection (the binding could not serve), the lease moves here first, same generation."""
    fenced = lease_fence(
        owner_hash=claim.owner_hash, generation=claim.generation, api_key_id=claim.key_id,
        connection_id=connection_id, now=now,
    )  # fmt: skip
    if fenced.outcome is not LeaseOutcome.CONNECTION_MISMATCH:
        return fenced
    return lease_transition(
        owner_hash=claim.owner_hash, generation=claim.generation, api_key_id=claim.key_id,
        provider=provider, connection_id=connection_id, reason=reason, now=now,
    )  # fmt: skip


def bound_first(context: AttemptContext) -> None:
    """The binding's targets first again, after the strategy ordered the plan."""
    claim, plan = context.lease, context.plan
    if claim is not None and claim.connection_id is not None:
        context.plan = replace(plan, targets=leased_targets(plan.targets, claim.connection_id, ()))
