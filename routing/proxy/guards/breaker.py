"""The provider breaker in the attempt loop: skip a provider that cannot execute."""

from __future__ import annotations

from omniroute.core.store import NOT_READ, StateStore
from resilience.domain.attribution import TimerClass
from resilience.services.breakers import breaker_acquire, breaker_key
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion


class BreakerFilter:
    """Excludes targets whose provider breaker is OPEN, or HALF_OPEN with no probe slot left."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def reads(self, target: Target) -> tuple[str, ...]:
        return (breaker_key(target.provider.slug),)

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        name = target.provider.slug
        policy = context.facts.snapshot.breaker_policy(name)
        raw = context.loop.read_ahead.pop(breaker_key(name), NOT_READ)
        breaker, permit = await breaker_acquire(store=self.store, name=name, policy=policy, raw=raw)
        if permit is not None:
            context.loop.permits[name] = permit
            return None
        retry_after = breaker.retry_after(policy, self.store.clock())
        return Exclusion(target, ExclusionReason.CIRCUIT_OPEN, retry_after, TimerClass.BREAKER)
