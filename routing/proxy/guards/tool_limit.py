"""Dynamic tool limits: a target that once answered "too many tools (max N)" is skipped by
later requests declaring more than N tools, without being asked (until the learnt limit
expires, :data:`TOOL_LIMIT_TTL_SECONDS`: providers raise their limits).

The recorder learns the limit from the 400 (``resilience.domain.attempts.tool_limit``); the 400
itself
charges no one and fails over. The filter reads it before dispatch.
"""

from __future__ import annotations

from omniroute.core.store import StateStore
from resilience.domain.attempts.tool_limit import tool_limit
from resilience.domain.attribution import TimerClass
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion

TOOL_LIMIT_TTL_SECONDS = 6 * 3600.0
_PREFIX = "tool-limit:"
_TEXT_BYTES = 4096


def _key(target: Target) -> str:
    return f"{_PREFIX}{target.connection.id}:{target.model}"


class ToolLimitFilter:
    """Excludes a target whose learnt tool limit the request exceeds."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        if not context.facts.tools:  # most requests declare none: no store read
            return None
        limit = await self.store.get(_key(target))
        if isinstance(limit, int) and context.facts.tools > limit:
            return Exclusion(target, ExclusionReason.TOOL_LIMIT, None, TimerClass.OPERATOR)
        return None


class ToolLimitRecorder:
    """Learns a target's tool limit from a 400 that states it."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        if outcome.kind is not OutcomeKind.HTTP_ERROR or outcome.status != 400:
            return
        if not context.facts.tools:
            return
        limit = tool_limit(outcome.body[:_TEXT_BYTES].decode("utf-8", "replace"))
        if limit is not None and limit < context.facts.tools:
            await self.store.set(_key(target), limit, ttl=TOOL_LIMIT_TTL_SECONDS)
