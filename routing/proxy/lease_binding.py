"""A managed request's plan narrowed to its lease, on the request's context.

The lease read and its checks are leases' (``leases.interface.lease_binding``); the context, its
plan and the route's pinned connections are routing's, so these two steps hand leases the
targets and write back what it gives.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from leases.interface import LeaseClaim, lease_binding, leased_targets
from routing.lease_routes import pinned_connections
from routing.proxy.context import AttemptContext


async def lease_bind(
    context: AttemptContext,
    claim: LeaseClaim,
    now: datetime,
    *,
    response_connection: int | None = None,
) -> None:
    """Check a managed request's lease and narrow its plan to the bound connection, then the
    connections no other owner holds; from now on the lease is fenced before each attempt.
    ``response_connection``: the connection that gave the response the request continues
    (``previous_response_id``), which binds the request as a pinned combo step does."""
    plan = context.plan
    pinned = pinned_connections(context.facts.snapshot, plan)
    if response_connection is not None:
        pinned = frozenset({response_connection})
    targets = await lease_binding(
        claim,
        plan.targets,
        pinned=pinned,
        now=now,
        request_id=context.facts.request_id,
    )
    context.plan = replace(plan, targets=targets)
    context.lease = claim


def bound_first(context: AttemptContext) -> None:
    """The binding's targets first again, after the strategy ordered the plan."""
    claim, plan = context.lease, context.plan
    if claim is not None and claim.connection_id is not None:
        context.plan = replace(plan, targets=leased_targets(plan.targets, claim.connection_id, ()))
