"""Connection cooldowns and terminal states in the attempt loop (reference-part1 §4).

The filter skips a connection that is terminal or still cooling (lazily: an elapsed cooldown
simply stops applying). Failures are charged by the attribution recorder: only account-wide
evidence cools a whole connection (spec decision 13).
"""

from __future__ import annotations

from resilience.domain.attribution import TimerClass
from resilience.services.connections import connection_state_get
from resilience.store import StateStore
from routing.attempts import AttemptContext, Exclusion
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
            return Exclusion(target, ExclusionReason.UNAVAILABLE, None, TimerClass.TERMINAL)
        remaining = state.remaining(self.store.clock())
        if remaining > 0:
            timer = state.timer or TimerClass.OPERATOR  # unknown (from the row): never panic
            return Exclusion(target, ExclusionReason.CONNECTION_COOLDOWN, remaining, timer)
        return None
