"""Model lockouts in the attempt loop (reference-part1 §5): skip a locked model, keep its
connection serving its other models."""

from __future__ import annotations

from resilience.domain.classifier import Classification
from resilience.domain.lockout import (
    LockRequest,
    lock_scope,
    lockout_takes,
    reason_for_status,
    selected_cooldown_ms,
)
from resilience.services.lockouts import (
    lockout_record,
    lockout_record_failure,
    lockout_record_success,
)
from resilience.store import StateStore
from routing.attempts import AttemptContext, Exclusion
from routing.domain.outcomes import Outcome
from routing.domain.planning import Target
from routing.domain.vocabulary import ExclusionReason

FORBIDDEN = "forbidden"


class ModelLockoutFilter:
    """Excludes a (provider, connection, model) that is locked."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        connection = target.connection.id
        record = await lockout_record(
            store=self.store, provider=target.provider.slug, connection_id=connection
        )
        context.lock_records[connection] = record
        lock = record.lock_for(target.model, self.store.clock())
        if lock is None:
            return None
        return Exclusion(target, ExclusionReason.MODEL_LOCKOUT, lock.remaining(self.store.clock()))


class ModelLockoutRecorder:
    """Locks a failing model (after the connection recorder classified the failure); decays on
    success."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        provider, connection = target.provider.slug, target.connection.id
        if outcome.ok:
            record = context.lock_records.get(connection)
            if record is not None and record.failures:
                await lockout_record_success(
                    store=self.store, provider=provider, connection_id=connection,
                    model=target.model,
                )  # fmt: skip
            return
        marked = context.marks.get((connection, target.model))
        if marked is None or marked.classification is None or not marked.model_only:
            return
        request = self._request(target, outcome, context, marked.classification)
        await lockout_record_failure(
            store=self.store, provider=provider, connection_id=connection, model=target.model,
            scope=lock_scope(outcome.status or 0), request=request,
            settings=context.snapshot.lockout, tz=context.snapshot.time_zone,
        )  # fmt: skip

    def _request(
        self,
        target: Target,
        outcome: Outcome,
        context: AttemptContext,
        classification: Classification,
    ) -> LockRequest:
        settings = context.snapshot.lockout
        window = context.snapshot.breaker_policy(target.provider.slug).reset_timeout
        if not lockout_takes(settings, outcome.status or 0):  # an operator rule of scope model
            return LockRequest(FORBIDDEN, classification.cooldown_ms or None, False, window)
        return LockRequest(
            reason=reason_for_status(outcome.status or 0),
            exact_cooldown_ms=selected_cooldown_ms(classification.cooldown_ms, settings) or None,
            exact_is_upstream_reset=classification.used_upstream_hint,
            window_seconds=window,
        )
