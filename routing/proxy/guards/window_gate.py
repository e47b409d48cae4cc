"""The opt-in window gate in the attempt loop: combos skip targets it holds."""

from __future__ import annotations

from omniroute.core.store import StateStore
from resilience.domain.attribution import TimerClass
from resilience.services.window_gate import (
    window_gate_record_failure,
    window_gate_record_success,
    window_gate_remaining,
)
from routing.domain.attempts.outcomes import Outcome
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion


class WindowGateFilter:
    """While enabled, excludes a combo target whose provider or connection is cooling down."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        policy = context.facts.snapshot.window_gate_policy(target.provider.slug)
        if policy is None or context.plan.combo is None:
            return None
        held = await window_gate_remaining(
            store=self.store,
            provider=target.provider.slug,
            connection_id=target.connection.id,
            policy=policy,
        )
        return None if held is None else Exclusion(target, held[0], held[1], TimerClass.SELF_SET)


class WindowGateRecorder:
    """While enabled, remembers combo target failures; any success clears the provider."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        policy = context.facts.snapshot.window_gate_policy(target.provider.slug)
        if policy is None:
            return
        provider, connection_id = target.provider.slug, target.connection.id
        if outcome.ok:
            await window_gate_record_success(
                store=self.store, provider=provider, connection_id=connection_id
            )
        elif context.plan.combo is not None and _transient(target, context):
            await window_gate_record_failure(
                store=self.store, provider=provider, connection_id=connection_id, policy=policy
            )


def _transient(target: Target, context: AttemptContext) -> bool:
    verdict = context.loop.verdict(target)
    return verdict is not None and verdict.fail_over and not verdict.attribution.request_only
