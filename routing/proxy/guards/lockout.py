"""Model lockouts (pair locks) in the attempt loop (docs/resilience.md, "Pair locks"):
skip a locked (connection, model) pair while the connection keeps serving its other
models.

When a pair's self-set lock has ended, one request claims its probe; the others keep skipping
it until the probe has answered (or its claim expired). A failed probe locks the pair again for
twice as long, up to the cap; the outcome recorder tells a probe's failure by the
record read here. When an upstream-hinted lock has ended, one request claims its probe too,
and the others poll the pair every :data:`PROBE_POLL_SECONDS` and follow as soon as the probe
succeeded (or wait for the new lock when it was refused again): a real rate limit sees about
one attempt per hint period. A probe that ends with no answer (the client left) gives its
claim back at once, and so does a probe whose attempt lost a hedge race (either kind).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from omniroute.core.store import NOT_READ, StateStore
from resilience.domain.attribution import TimerClass
from resilience.services.lockouts import lockout_key, lockout_record
from resilience.services.probes import (
    pair_hinted_probe_claim,
    pair_probe_claim,
    pair_probe_release,
)
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion

PROBE_CLAIM_SECONDS = 10.0
PROBE_POLL_SECONDS = 0.1  # how often a request waiting for another's probe looks again


class ModelLockoutFilter:
    """Excludes a (provider, connection, model) that is locked, or whose probe is out."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def reads(self, target: Target) -> tuple[str, ...]:
        return (lockout_key(target.provider.slug, target.connection.id),)

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        connection, now = target.connection.id, self.store.clock()
        provider = target.provider.slug
        raw = context.loop.read_ahead.pop(lockout_key(provider, connection), NOT_READ)
        record = await lockout_record(
            store=self.store, provider=provider, connection_id=connection, raw=raw
        )
        context.loop.lock_records[connection] = record
        if record.empty:  # nothing locked, nothing failing: no slot to look up
            return None
        lock = record.lock_for(target.model, now)
        if lock is not None:
            timer = lock.timer or TimerClass.OPERATOR  # unknown: never overridden by panic
            return Exclusion(target, ExclusionReason.MODEL_LOCKOUT, lock.remaining(now), timer)
        hinted = record.awaiting_hinted_probe(target.model)
        if hinted is not None:
            return await self._hinted_probe(target, context, hinted)
        threshold = context.facts.snapshot.availability.consecutive_failures
        generation = record.awaiting_probe(target.model, threshold)
        if generation is None:
            return None
        key = await pair_probe_claim(
            store=self.store,
            provider=target.provider.slug,
            connection_id=connection,
            model=target.model,
            generation=generation,
            ttl=PROBE_CLAIM_SECONDS,
        )
        if key is not None:
            self._releasable(target, context, key)
            return None
        return Exclusion(target, ExclusionReason.MODEL_LOCKOUT, 1.0, TimerClass.SELF_SET)

    def _releasable(
        self, target: Target, context: AttemptContext, key: str
    ) -> Callable[[], Awaitable[None]]:
        """The claim's release, once at most, kept for a cancelled attempt on the pair."""
        released = False

        async def release() -> None:
            nonlocal released
            if not released:
                released = True
                await pair_probe_release(store=self.store, key=key)

        context.loop.probe_releases[(target.connection.id, target.model)] = release
        return release

    async def _hinted_probe(
        self, target: Target, context: AttemptContext, generation: float
    ) -> Exclusion | None:
        """The probe of an ended hinted lock for the first request; a short poll for others."""
        key = await pair_hinted_probe_claim(
            store=self.store,
            provider=target.provider.slug,
            connection_id=target.connection.id,
            model=target.model,
            generation=generation,
            ttl=PROBE_CLAIM_SECONDS,
        )
        if key is None:
            return Exclusion(
                target,
                ExclusionReason.MODEL_LOCKOUT,
                PROBE_POLL_SECONDS,
                TimerClass.HINTED,
                polling=True,
            )

        release = self._releasable(target, context, key)

        async def release_if_unanswered() -> None:
            pair = (target.connection.id, target.model)
            if not any((t.connection.id, t.model) == pair for t, _ in context.loop.attempts):
                await release()

        context.on_finish.append(release_if_unanswered)
        return None
