"""Which attempt outcomes count against a provider's breaker (pure)."""

from __future__ import annotations

from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.plan.planning import RoutePlan, Target

TRIP_STATUSES = frozenset({408, 500, 502, 503, 504})
# Failures caused by the request itself, not by the provider's health.
REQUEST_SCOPED_CODES = (
    b"context_length_exceeded",
    b"upstream_empty_response",
    b"upstream_response_failed",
)
BODY_SCAN_BYTES = 8192


def trips_breaker(outcome: Outcome) -> bool:
    """Network failures, timeouts and 408/500/502/503/504 trip; 429, other 4xx, 2xx never do.

    A model-capacity overload ("overloaded") and request-scoped failures do not count either.
    """
    if outcome.kind in (OutcomeKind.NETWORK_ERROR, OutcomeKind.TIMEOUT):
        return True
    if outcome.kind is not OutcomeKind.HTTP_ERROR or outcome.status not in TRIP_STATUSES:
        return False
    body = outcome.body[:BODY_SCAN_BYTES].lower()
    return b"overloaded" not in body and not any(code in body for code in REQUEST_SCOPED_CODES)


def next_step_provider(plan: RoutePlan, step: int) -> str | None:
    """The provider of the first target of a later combo step, if any."""
    for target in plan.targets:
        if target.step > step:
            return target.provider.slug
    return None


def counts_for_breaker(plan: RoutePlan, target: Target, outcome: Outcome) -> bool:
    """Whether this attempt's failure is recorded on the provider's breaker.

    In a combo a failure counts only when the next step is on another provider (or there is no
    next step): falling back within one provider says nothing about the provider as a whole.
    """
    if not trips_breaker(outcome):
        return False
    if plan.combo is None:
        return True
    return next_step_provider(plan, target.step) != target.provider.slug
