"""Connection cooldowns and terminal states in the attempt loop (reference-part1 §4).

The filter skips a connection that is terminal or still cooling (lazily: an elapsed cooldown
simply stops applying). The recorder classifies each failure and marks the connection, so one
key that keeps failing is skipped while the provider's other keys keep serving.
"""

from __future__ import annotations

from dataclasses import replace

from resilience.domain.classifier import classify
from resilience.domain.connection_state import FailureFacts
from resilience.domain.signals import is_credits_exhausted
from resilience.services.connections import (
    connection_cool_siblings,
    connection_mark_failed,
    connection_mark_succeeded,
    connection_state_get,
)
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
            await connection_mark_succeeded(
                store=self.store, connection_id=connection.id, durable=connection.state
            )
            return
        snapshot = context.snapshot
        failure = failure_input(target, outcome, snapshot.error_rules.get(target.provider.slug, ()))
        profile = snapshot.cooldown_profile(target.provider.slug)
        now, tz = self.store.clock(), snapshot.time_zone
        facts = FailureFacts(
            status=failure.status,
            text=failure.text,
            error_type="",
            disable_cooling=connection.disable_cooling,
            per_model_quota=target.provider.per_model_quota,
        )
        marked = await connection_mark_failed(
            store=self.store,
            connection_id=connection.id,
            durable=connection.state,
            classify=lambda level: classify(
                replace(failure, backoff_level=level), profile, now=now, tz=tz
            ),
            facts=facts,
            credits_signal=is_credits_exhausted(failure.text),
        )
        if marked.provider_wide and marked.cooldown_ms > 0:
            siblings = {
                c.id: c.state
                for c in snapshot.connections_for(target.provider.slug)
                if c.id != connection.id
            }
            await connection_cool_siblings(
                store=self.store, durable=siblings, cooldown_ms=marked.cooldown_ms
            )
