"""The one resilience service an attempt's outcome goes through.

Routing hands in plain data (who was asked, what happened, the policies in force) and gets a
:class:`Verdict` back: the failure's scope and effect. Behind it, each piece of state has its
owner: pair counts and locks (``lockouts``), connection cooldowns and terminal states
(``connections``), the request-rejected streak (``streaks``) and the provider breaker
(``breakers``). Nothing here knows about routing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, tzinfo

from omniroute.core.scrub import scrub
from omniroute.core.store import StateStore
from resilience.domain.attribution import (
    Attribution,
    Effect,
    FailureSignals,
    Scope,
    TimerClass,
    attribute,
)
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.breaker.machine import BreakerPolicy, Permit
from resilience.domain.classify.classifier import (
    Classification,
    CooldownProfile,
    FailureInput,
    Reason,
    classify,
)
from resilience.domain.classify.retry_hints import detect_retry_hint
from resilience.domain.classify.signals import is_credits_exhausted
from resilience.domain.connection_state import ConnectionState, FailureFacts, Marked
from resilience.domain.lock_record import LockRecord
from resilience.domain.lockout import (
    LockoutSettings,
    LockRequest,
    LockScope,
    counts_toward_pair,
)
from resilience.domain.streak import StreakDecision, is_refusal
from resilience.services.breakers import (
    FRESH_PERMIT,
    breaker_record_failure,
    breaker_record_success,
)
from resilience.services.connections import (
    connection_cool_siblings,
    connection_mark_failed,
    connection_mark_succeeded,
    connection_record_short_hint,
)
from resilience.services.lockouts import (
    lockout_record_failure,
    lockout_record_success,
    pair_record_hinted,
    pair_record_transient,
)
from resilience.services.streaks import streak_clear, streak_record_refusal

REQUEST_REJECTED = "request_rejected"


@dataclass(frozen=True, slots=True)
class Subject:
    """Who was asked: a (connection, model) pair of a provider."""

    provider: str
    connection_id: int
    model: str
    durable: ConnectionState = field(default_factory=ConnectionState)  # the row's state
    disable_cooling: bool = False
    per_model_quota: bool = True
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def source(self) -> str:
        return f"{self.connection_id}:{self.model}"


@dataclass(frozen=True, slots=True)
class Policies:
    """The numbers in force for the subject's provider."""

    profile: CooldownProfile
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    lockout: LockoutSettings = field(default_factory=LockoutSettings)
    availability: AvailabilitySettings = field(default_factory=AvailabilitySettings)
    tz: tzinfo = UTC
    # A hint up to this long is "short": the request that got it handles it, and it locks the
    # pair for others only on evidence (the global ``attempts.maxRetryAfterWaitMs``).
    short_hint_ms: int = 5_000


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one failure was charged to and what that did."""

    attribution: Attribution
    effect: Effect = Effect.NONE
    marked: Marked | None = None  # the connection marking, for connection-scoped failures
    classification: Classification | None = None
    hint_ms: int | None = None  # the upstream's retry hint, whatever the profile says

    @property
    def fail_over(self) -> bool:
        return self.attribution.fail_over

    @property
    def transient(self) -> bool:
        return self.attribution.transient


def _signals(
    subject: Subject, failure: FailureInput, network: bool, now: float, tz: tzinfo
) -> FailureSignals:
    hint = detect_retry_hint(failure.headers, failure.text, now=now, tz=tz)
    return FailureSignals(
        status=failure.status,
        text=failure.text,
        structured_code=failure.structured_code,
        network=network,
        per_model_quota=subject.per_model_quota,
        hint_ms=hint.ms if hint is not None and hint.ms > 0 else None,
        refusal=is_refusal(failure.status, failure.text),
    )


async def attempt_failed(
    *,
    store: StateStore,
    subject: Subject,
    failure: FailureInput,
    policies: Policies,
    network: bool = False,
    breaker_counts: bool = True,
    permit: Permit | None = None,
    siblings: Mapping[int, ConnectionState] | None = None,
    never_terminal: bool = False,
    seen: ConnectionState | None = None,
    probe: bool = False,
) -> Verdict:
    """Charge one failed attempt to its narrowest scope and apply the effect. ``probe``: the
    attempt held its pair's probe (the pair's run had locked it when the attempt was let
    through), so a transient failure doubles the pair's lock."""
    now = store.clock()
    level = (seen or subject.durable).backoff_level
    classification = classify(
        replace(failure, backoff_level=level), policies.profile, now=now, tz=policies.tz
    )
    signals = _signals(subject, failure, network, now, policies.tz)
    attribution = attribute(signals, classification)
    hint = signals.hint_ms
    if attribution.scope is Scope.REQUEST:
        return Verdict(attribution, classification=classification, hint_ms=hint)
    if attribution.scope is Scope.PAIR:
        status = None if network else failure.status  # a dropped connection has no status
        effect = await _charge_pair(store, subject, attribution, policies, status, probe)
    else:
        verdict = await _charge_connection(
            store,
            subject,
            failure,
            attribution,
            policies,
            signals,
            siblings or {},
            never_terminal,
        )
        return replace(verdict, hint_ms=hint)
    if attribution.breaker and breaker_counts and not classification.skip_provider_breaker:
        await breaker_record_failure(
            store=store,
            name=subject.provider,
            policy=policies.breaker,
            connection_id=subject.connection_id,
            network=network,
            permit=permit,
            source=None if network else subject.source,
        )
    return Verdict(attribution, effect, classification=classification, hint_ms=hint)


async def _charge_pair(
    store: StateStore,
    subject: Subject,
    attribution: Attribution,
    policies: Policies,
    status: int | None,
    probe: bool = False,
) -> Effect:
    window = policies.breaker.reset_timeout
    if subject.disable_cooling:  # the operator's word: count nothing, lock nothing
        return Effect.NONE
    if attribution.transient:
        if not counts_toward_pair(policies.lockout, status):
            return Effect.NONE  # modelLockout.errorCodes leaves this status out
        lock = await pair_record_transient(
            store=store,
            provider=subject.provider,
            connection_id=subject.connection_id,
            model=subject.model,
            reason=attribution.reason or "server_error",
            availability=policies.availability,
            window_seconds=window,
            probe=probe,
        )
        return Effect.LOCKED if lock is not None else Effect.COUNTED
    if attribution.lock_ms <= 0 and attribution.timer is not TimerClass.OPERATOR:
        return Effect.NONE
    hinted = attribution.timer is TimerClass.HINTED
    if hinted:
        return await _charge_hinted_pair(store, subject, attribution, policies)
    request = LockRequest(
        reason=attribution.reason or "unknown",
        exact_cooldown_ms=attribution.lock_ms or None,
        exact_is_upstream_reset=hinted,  # exactly what the upstream said
        window_seconds=window,
        timer=str(attribution.timer or ""),
    )
    await lockout_record_failure(
        store=store,
        provider=subject.provider,
        connection_id=subject.connection_id,
        model=subject.model,
        scope=LockScope.EXACT,
        request=request,
        settings=policies.lockout,
        tz=policies.tz,
    )
    return Effect.LOCKED


async def _charge_hinted_pair(
    store: StateStore, subject: Subject, attribution: Attribution, policies: Policies
) -> Effect:
    """An upstream hint on the pair: exactly what the upstream said, for everyone only when
    it is long, a quota, or the pair's second hinted refusal in a row."""
    quota = attribution.reason == Reason.QUOTA_EXHAUSTED
    short = not quota and attribution.lock_ms <= policies.short_hint_ms
    request = LockRequest(
        reason=attribution.reason or "unknown",
        exact_cooldown_ms=attribution.lock_ms,
        exact_is_upstream_reset=True,
        window_seconds=policies.breaker.reset_timeout,
        timer=TimerClass.HINTED,
    )
    lock = await pair_record_hinted(
        store=store,
        provider=subject.provider,
        connection_id=subject.connection_id,
        model=subject.model,
        request=request,
        settings=policies.lockout,
        tz=policies.tz,
        short=short,
    )
    return Effect.LOCKED if lock is not None else Effect.COUNTED


async def _charge_connection(
    store: StateStore,
    subject: Subject,
    failure: FailureInput,
    attribution: Attribution,
    policies: Policies,
    signals: FailureSignals,
    siblings: Mapping[int, ConnectionState],
    never_terminal: bool,
) -> Verdict:
    now = store.clock()
    self_set = attribution.timer is TimerClass.SELF_SET

    def classified(level: int) -> Classification:
        found = classify(
            replace(failure, backoff_level=level), policies.profile, now=now, tz=policies.tz
        )
        if self_set and found.cooldown_ms > 0:
            return policies.availability.self_set_cooldown(found, level)
        return found

    if await _short_hint_without_evidence(store, subject, attribution, policies, signals):
        return Verdict(attribution, Effect.COUNTED)
    if signals.refusal:
        decision = await streak_record_refusal(store=store, connection_id=subject.connection_id)
        if not decision.counted:  # in flight before the streak's cooldown was written
            return Verdict(attribution)
        classified = functools.partial(refusal_classification, decision)
    facts = FailureFacts(
        status=failure.status,
        text=scrub(failure.text, subject.secrets),
        error_type="",
        disable_cooling=subject.disable_cooling,
        per_model_quota=subject.per_model_quota,
        never_terminal=never_terminal,
        timer=str(attribution.timer or ""),
    )
    marked = await connection_mark_failed(
        store=store,
        connection_id=subject.connection_id,
        durable=subject.durable,
        classify=classified,
        facts=facts,
        credits_signal=is_credits_exhausted(failure.text),
    )
    if marked.provider_wide and marked.cooldown_ms > 0 and siblings:
        await connection_cool_siblings(
            store=store, durable=dict(siblings), cooldown_ms=marked.cooldown_ms
        )
    effect = Effect.NONE
    if marked.terminal is not None:
        effect = Effect.TERMINAL
    elif marked.cooldown_ms > 0:
        effect = Effect.COOLED
    return Verdict(attribution, effect, marked, marked.classification)


async def _short_hint_without_evidence(
    store: StateStore,
    subject: Subject,
    attribution: Attribution,
    policies: Policies,
    signals: FailureSignals,
) -> bool:
    """A short upstream hint charged to the whole connection (a provider whose quota is
    account-wide) is the business of the request that got it, like a pair's: it
    cools the connection for everyone only when it is the connection's second
    hinted refusal in a row. Quota and account-limit wording cools at once."""
    hint = signals.hint_ms
    quota = attribution.reason == Reason.QUOTA_EXHAUSTED
    if attribution.timer is not TimerClass.HINTED or quota or not hint:
        return False
    if hint > policies.short_hint_ms or subject.disable_cooling:
        return False
    evidence = await connection_record_short_hint(
        store=store, connection_id=subject.connection_id, durable=subject.durable, hint_ms=hint
    )
    return not evidence


def refusal_classification(decision: StreakDecision, level: int) -> Classification:
    """A counted refusal: the streak's cooldown rung, or a ban on the third in a row."""
    if decision.escalate:
        return Classification(
            fallback=True,
            cooldown_ms=0,
            new_backoff_level=level,
            reason=Reason.AUTH_ERROR,
            permanent=True,
            skip_provider_breaker=True,
        )
    cooldown_ms = int(decision.cooldown_seconds * 1000)
    return Classification(
        fallback=True,
        cooldown_ms=cooldown_ms,
        new_backoff_level=level,
        reason=REQUEST_REJECTED,
        base_cooldown_ms=cooldown_ms,
    )


async def attempt_succeeded(
    *,
    store: StateStore,
    subject: Subject,
    policies: Policies,
    permit: Permit | None,
    seen: ConnectionState | None = None,
    locks: LockRecord | None = None,
) -> None:
    """A success: recovery for whatever the failures left (each write only when needed)."""
    cleared = await connection_mark_succeeded(
        store=store, connection_id=subject.connection_id, durable=subject.durable, seen=seen
    )
    if cleared:  # a streak only exists on a connection that has errors to clear
        await streak_clear(store=store, connection_id=subject.connection_id)
    if locks is not None and locks.concerns(subject.model):
        await lockout_record_success(
            store=store,
            provider=subject.provider,
            connection_id=subject.connection_id,
            model=subject.model,
        )
    if permit is not None and permit is not FRESH_PERMIT:
        await breaker_record_success(
            store=store,
            name=subject.provider,
            policy=policies.breaker,
            connection_id=subject.connection_id,
            permit=permit,
        )
