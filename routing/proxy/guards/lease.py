"""The lease fence as the attempt loop's last holder.

A managed request's lease is checked again right before every upstream attempt, after every
other holder has admitted it: a wait at a semaphore or in the request queue may have outlived
the lease. When the attempt goes to another connection than the binding (the binding was
excluded, failed, or does not serve the model), the lease moves there first, keeping its
generation.

* the lease still holds (or moved) → the attempt goes ahead;
* the lease ended, or another generation or key holds it → 409 ``LEASE_REQUIRED`` /
  ``LEASE_FENCE_STALE``, and no target is tried: the answer is about the request;
* another owner took the connection meanwhile → 429 ``LEASE_CAPACITY_UNAVAILABLE`` for this
  target only; the loop tries the next one.

Every refusal is local and request-scoped: never recorded against a connection, a model or a
breaker. Ordinary requests (no lease) pass at once, without a query.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError
from django.utils import timezone

from leases.interface import (
    LEASE_ERROR_TYPE,
    LeaseCode,
    LeaseOutcome,
    capacity_unavailable,
    distinct_connections,
    lease_fence_or_move,
    retry_after_seconds,
    transition_reason,
)
from omniroute.core.db import db_sync_to_async
from resilience.domain.attribution import TimerClass
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.admission.gates import NO_HOLD
from routing.proxy.context import AttemptContext, Exclusion
from routing.proxy.seams import Held, HoldRefused

logger = logging.getLogger(__name__)

HOLDS = frozenset({LeaseOutcome.VALID, LeaseOutcome.TRANSITIONED, LeaseOutcome.REUSED})
STALE_MESSAGE = "The lease generation is not the active one for this owner and key."
ENDED_MESSAGE = "The lease ended while the request waited; acquire it again."
UNAVAILABLE_MESSAGE = "The lease service is temporarily unavailable; retry shortly."


class LeaseBindingFilter:
    """A managed request whose bound connection failed because of the request itself (an
    invalid parameter, a context too long, a model it lacks) asks no other
    connection: they would answer alike, and the lease would move off a healthy binding for
    nothing. The binding's own answer is the client's."""

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        claim = context.lease
        if claim is None or target.connection.id == claim.connection_id:
            return None
        for tried, outcome in context.loop.attempts:
            if tried.connection.id != claim.connection_id or outcome.ok:
                continue
            verdict = context.loop.verdict(tried)
            if verdict is not None and verdict.attribution.request_only:
                return Exclusion(target, ExclusionReason.LEASE_BOUND, None, TimerClass.OPERATOR)
        return None


class LeaseFenceHolder:
    """Fences a managed request's lease before each attempt (last in the holder chain)."""

    def applies(self, target: Target, context: AttemptContext) -> bool:
        return context.lease is not None  # a managed request's

    async def acquire(self, target: Target, context: AttemptContext) -> Held:
        claim = context.lease
        if claim is None:
            return NO_HOLD
        excluded = (e.target.connection.id for e in context.loop.exclusions)
        reason = transition_reason(claim.connection_id, context.plan.targets, excluded)
        now = timezone.now()
        try:
            result = await db_sync_to_async(lease_fence_or_move)(
                claim=claim,
                connection_id=target.connection.id,
                provider=target.provider.slug,
                reason=reason,
                now=now,
            )
        except DatabaseError:
            logger.exception(
                "request %s: the lease fence could not be read", context.facts.request_id
            )
            raise _stop(503, LeaseCode.SERVICE_UNAVAILABLE, UNAVAILABLE_MESSAGE) from None
        if result.outcome in HOLDS:
            claim.connection_id = target.connection.id
            return NO_HOLD
        if result.outcome is LeaseOutcome.CONNECTION_BUSY:
            raise _busy(context, retry_after_seconds(result.retry_after, now))
        if result.outcome is LeaseOutcome.REQUIRED:
            raise _stop(409, LeaseCode.REQUIRED, ENDED_MESSAGE)
        raise _stop(409, LeaseCode.FENCE_STALE, STALE_MESSAGE)


def _stop(status: int, code: LeaseCode, message: str) -> HoldRefused:
    return HoldRefused(status, code.value, message, error_type=LEASE_ERROR_TYPE, stops=True)


def _busy(context: AttemptContext, retry_after: int) -> HoldRefused:
    """Another owner took this connection since the plan was made: this target only."""
    eligible = len(distinct_connections(context.plan.targets))
    error = capacity_unavailable(retry_after, eligible, 0)
    return HoldRefused(
        error.status,
        error.code,
        error.message,
        retry_after,
        error_type=LEASE_ERROR_TYPE,
        extra=error.extra,
    )
