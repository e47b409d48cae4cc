"""The provider breaker in the attempt loop: skip a provider that cannot execute, count outcomes."""

from __future__ import annotations

from resilience.domain.breaker import BreakerPolicy
from resilience.services.breakers import (
    FRESH_PERMIT,
    breaker_acquire,
    breaker_record_failure,
    breaker_record_success,
)
from resilience.store import StateStore
from routing.attempts import AttemptContext, Exclusion
from routing.domain.breaker_rules import counts_for_breaker
from routing.domain.outcomes import Outcome, OutcomeKind
from routing.domain.planning import Target
from routing.domain.vocabulary import ExclusionReason


def _policy(context: AttemptContext, target: Target) -> BreakerPolicy:
    return context.snapshot.breaker_policy(target.provider.slug)


def _skips_breaker(target: Target, context: AttemptContext) -> bool:
    """The classifier's say: e.g. a service-supervisor hint never counts (§4.3 step 3)."""
    marked = context.marks.get((target.connection.id, target.model))
    return bool(marked and marked.classification and marked.classification.skip_provider_breaker)


class BreakerFilter:
    """Excludes targets whose provider breaker is OPEN, or HALF_OPEN with no probe slot left."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        name = target.provider.slug
        policy = _policy(context, target)
        breaker, permit = await breaker_acquire(store=self.store, name=name, policy=policy)
        if permit is not None:
            context.permits[name] = permit
            return None
        retry_after = breaker.retry_after(policy, self.store.clock())
        return Exclusion(target, ExclusionReason.CIRCUIT_OPEN, retry_after)


class BreakerRecorder:
    """Records successes and breaker-relevant failures on the provider's breaker."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        name = target.provider.slug
        policy, permit = _policy(context, target), context.permits.get(name)
        connection_id = target.connection.id
        if outcome.ok and permit is FRESH_PERMIT:
            return  # the provider had no breaker record when selected: nothing to recover
        if outcome.ok:
            await breaker_record_success(
                store=self.store, name=name, policy=policy, connection_id=connection_id,
                permit=permit,
            )  # fmt: skip
        elif counts_for_breaker(context.plan, target, outcome) and not _skips_breaker(
            target, context
        ):
            network = outcome.kind in (OutcomeKind.NETWORK_ERROR, OutcomeKind.TIMEOUT)
            await breaker_record_failure(
                store=self.store, name=name, policy=policy, connection_id=connection_id,
                network=network, permit=permit,
            )  # fmt: skip
