"""Connection cooldowns and terminal states in the attempt loop (reference-part1 §4).

The filter skips a connection that is terminal or still cooling (lazily: an elapsed cooldown
simply stops applying). The recorder classifies each failure and marks the connection, so one
key that keeps failing is skipped while the provider's other keys keep serving.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from resilience.domain.classifier import Classification, Reason, classify
from resilience.domain.connection_state import FailureFacts
from resilience.domain.lockout import lockout_takes
from resilience.domain.signals import is_credits_exhausted
from resilience.domain.streak import StreakDecision, is_refusal
from resilience.services.connections import (
    connection_cool_siblings,
    connection_mark_failed,
    connection_mark_succeeded,
    connection_state_get,
)
from resilience.services.streaks import streak_clear, streak_record_refusal
from resilience.store import StateStore
from routing.attempts import AttemptContext, Exclusion
from routing.domain.failures import failure_input
from routing.domain.outcomes import Outcome
from routing.domain.planning import Target
from routing.domain.vocabulary import ExclusionReason


class ConnectionFilter:
    """Excludes terminal connections and connections still cooling down."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        connection = target.connection
        state = await connection_state_get(
            store=self.store, connection_id=connection.id, durable=connection.state
        )
        context.connection_states[connection.id] = state
        if state.is_terminal:
            return Exclusion(target, ExclusionReason.UNAVAILABLE)
        remaining = state.remaining(self.store.clock())
        if remaining > 0:
            return Exclusion(target, ExclusionReason.CONNECTION_COOLDOWN, remaining)
        return None


class ConnectionRecorder:
    """Clears a connection's errors on success; classifies and marks it on failure."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        connection = target.connection
        if outcome.ok:
            cleared = await connection_mark_succeeded(
                store=self.store, connection_id=connection.id, durable=connection.state,
                seen=context.connection_states.get(connection.id),
            )  # fmt: skip
            if cleared:  # a streak only exists on a connection that has errors to clear
                await streak_clear(store=self.store, connection_id=connection.id)
            return
        snapshot = context.snapshot
        failure = failure_input(target, outcome, snapshot.error_rules.get(target.provider.slug, ()))
        profile = snapshot.cooldown_profile(target.provider.slug)
        now, tz = self.store.clock(), snapshot.time_zone

        def classified(level: int) -> Classification:
            return classify(replace(failure, backoff_level=level), profile, now=now, tz=tz)

        if is_refusal(failure.status, failure.text):
            decision = await streak_record_refusal(store=self.store, connection_id=connection.id)
            if not decision.counted:
                return  # in flight before the streak's cooldown was written
            classified = functools.partial(refusal_classification, decision)
        facts = FailureFacts(
            status=failure.status,
            text=failure.text,
            error_type="",
            disable_cooling=connection.disable_cooling,
            per_model_quota=target.provider.per_model_quota,
            model_only=lockout_takes(snapshot.lockout, failure.status),
            never_terminal=target.provider.egress_bucketed_lock and failure.status == 429,
        )
        marked = await connection_mark_failed(
            store=self.store,
            connection_id=connection.id,
            durable=connection.state,
            classify=classified,
            facts=facts,
            credits_signal=is_credits_exhausted(failure.text),
        )
        context.marks[(connection.id, target.model)] = marked
        if marked.provider_wide and marked.cooldown_ms > 0:
            siblings = {
                c.id: c.state
                for c in snapshot.connections_for(target.provider.slug)
                if c.id != connection.id
            }
            await connection_cool_siblings(
                store=self.store, durable=siblings, cooldown_ms=marked.cooldown_ms
            )


REQUEST_REJECTED = "request_rejected"


def refusal_classification(decision: StreakDecision, level: int) -> Classification:
    """A counted refusal: the streak's cooldown rung, or a ban on the third in a row (§4.6)."""
    if decision.escalate:
        return Classification(
            fallback=True, cooldown_ms=0, new_backoff_level=level,
            reason=Reason.AUTH_ERROR, permanent=True, skip_provider_breaker=True,
        )  # fmt: skip
    cooldown_ms = int(decision.cooldown_seconds * 1000)
    return Classification(
        fallback=True, cooldown_ms=cooldown_ms, new_backoff_level=level,
        reason=REQUEST_REJECTED, base_cooldown_ms=cooldown_ms,
    )  # fmt: skip
