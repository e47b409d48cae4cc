"""The attempt loop's one outcome recorder: every outcome goes to the resilience attribution
service once, which charges failures to their narrowest scope."""

from __future__ import annotations

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import Permit
from resilience.domain.connection_state import ConnectionState
from resilience.domain.lock_record import LockRecord
from resilience.services.attribution import (
    Policies,
    Subject,
    Verdict,
    attempt_failed,
    attempt_succeeded,
)
from resilience.services.breakers import FRESH_PERMIT
from routing.domain.attempts.breaker_rules import counts_for_breaker
from routing.domain.attempts.failures import failure_input
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext


def subject_of(target: Target) -> Subject:
    connection = target.connection
    return Subject(
        provider=target.provider.slug,
        connection_id=connection.id,
        model=target.model,
        durable=connection.state,
        disable_cooling=connection.disable_cooling,
        # an egress-bucketed provider counts quota per egress: never a per-model 429
        per_model_quota=target.provider.per_model_quota
        and not target.provider.egress_bucketed_lock,
        secrets=(connection.secret,) if connection.secret else (),
    )


def policies_of(target: Target, context: AttemptContext) -> Policies:
    snapshot, slug = context.facts.snapshot, target.provider.slug
    return Policies(
        profile=snapshot.cooldown_profile(slug),
        breaker=snapshot.breaker_policy(slug),
        lockout=snapshot.lockout,
        availability=snapshot.availability,
        tz=snapshot.time_zone,
        short_hint_ms=snapshot.attempts.max_retry_after_wait_ms,
    )


def _nothing_to_recover(
    permit: Permit | None, seen: ConnectionState | None, locks: LockRecord | None, model: str
) -> bool:
    """Selected clean (no connection errors, no pair state) and the provider had no breaker."""
    clean = seen is not None and seen.is_clean
    return clean and permit is FRESH_PERMIT and (locks is None or not locks.concerns(model))


class AttributionRecorder:
    """Hands each outcome to the attribution service and keeps its verdict for the loop."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        connection, slug = target.connection, target.provider.slug
        permit = context.loop.permits.get(slug)
        seen = context.loop.connection_states.get(connection.id)
        if outcome.ok:
            locks = context.loop.lock_records.get(connection.id)
            if _nothing_to_recover(permit, seen, locks, target.model):
                return  # the hot path: a healthy target leaves no state to clear
            await attempt_succeeded(
                store=self.store,
                subject=subject_of(target),
                policies=policies_of(target, context),
                permit=permit,
                seen=seen,
                locks=locks,
            )
            return
        subject, policies = subject_of(target), policies_of(target, context)
        snapshot = context.facts.snapshot
        failure = failure_input(target, outcome, snapshot.error_rules.get(slug, ()))
        siblings = {c.id: c.state for c in snapshot.connections_for(slug) if c.id != connection.id}
        # The pair's record as read when the attempt was let through: a run that had locked
        # the pair makes this attempt its probe (after the lock, or a panic attempt through it).
        locks = context.loop.lock_records.get(connection.id)
        threshold = snapshot.availability.consecutive_failures
        probe = locks is not None and locks.locked_in_run(target.model, threshold)
        verdict: Verdict = await attempt_failed(
            store=self.store,
            subject=subject,
            failure=failure,
            policies=policies,
            network=outcome.kind is OutcomeKind.NETWORK_ERROR,
            breaker_counts=counts_for_breaker(context.plan, target, outcome),
            permit=permit,
            siblings=siblings,
            never_terminal=target.provider.egress_bucketed_lock and failure.status == 429,
            seen=seen,
            probe=probe,
        )
        context.loop.verdicts[(connection.id, target.model)] = verdict
