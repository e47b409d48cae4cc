"""Connection cooldowns and terminal states in the attempt loop.

The filter skips a connection that is terminal or still cooling (lazily: an elapsed cooldown
simply stops applying). Failures are charged by the attribution recorder: only account-wide
evidence cools a whole connection.
"""

from __future__ import annotations

from omniroute.core.store import NOT_READ, StateStore
from resilience.domain.attribution import TimerClass
from resilience.services.connections import connection_key, connection_state_get
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion


class ConnectionFilter:
    """Excludes terminal connections and connections still cooling down."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def reads(self, target: Target) -> tuple[str, ...]:
        return (connection_key(target.connection.id),)

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        connection = target.connection
        state = await connection_state_get(
            store=self.store,
            connection_id=connection.id,
            durable=connection.state,
            raw=context.loop.read_ahead.pop(connection_key(connection.id), NOT_READ),
        )
        context.loop.connection_states[connection.id] = state
        if state.is_terminal:
            return Exclusion(target, ExclusionReason.UNAVAILABLE, None, TimerClass.TERMINAL)
        remaining = state.remaining(self.store.clock())
        if remaining > 0:
            timer = state.timer or TimerClass.OPERATOR  # unknown (from the row): never panic
            return Exclusion(target, ExclusionReason.CONNECTION_COOLDOWN, remaining, timer)
        return None
