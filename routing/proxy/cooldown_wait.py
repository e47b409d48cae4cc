"""The cooldown-aware wait:
when a pass over a request's plan ended with every target that could serve it behind a timer
(excluded by one, or failed setting one), wait for the earliest upstream-hinted timer and try
again, instead of answering 429 or 503 at once. Single models and combos wait through this one
mechanism; the longest single wait is ``attempts.maxRetryAfterWaitMs`` for a single model and
``comboCooldownWait.maxWaitMs`` for a combo, and ``comboCooldownWait``'s ``maxAttempts`` and
``budgetMs`` bound the waits of every request (its ``enabled`` switch is the combos' own).

Only upstream-hinted timers are waited for: the upstream said when it takes calls again. The
timer's class stands for the reason the wait judges: an upstream hint (``Retry-After``, reset
headers) is ``rate_limit`` (waited for); a quota timer is ``quota_exhausted`` (never: its reset
is hours away). A quota exhaustion is not waited for even when its answer carried a short
``Retry-After``: the reason of the failure, or of the lock it left, wins over the timer's
class. Timers of other classes exclude their own targets and never block the wait for a
hinted one; self-set timers are the panic attempt's. The wait is the timer's
remainder plus :data:`MARGIN_MS`, within the caps and the request's deadline.

A request that waits for another request's probe of a pair (``Exclusion.polling``) looks again
every tenth of a second; those polls spend the budget but are not counted as waits.

Before each wait the loop awaits ``AttemptContext.before_wait``: nothing by default; for a
streaming client, the consumer's keep-alive (the answer's head and an SSE comment at once, so
that a long wait does not trip the client's first-byte timeout).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from resilience.domain.attempts.cooldown_wait import ComboCooldownWaitSettings, should_wait
from resilience.domain.attribution import TimerClass
from resilience.domain.classify.classification import Reason
from resilience.domain.lockout import model_slots
from routing.domain.config.vocabulary import ExclusionReason

if TYPE_CHECKING:
    from routing.domain.plan.planning import Target
    from routing.proxy.context import AttemptContext

MARGIN_MS = 50
QUOTA_EXHAUSTED = str(Reason.QUOTA_EXHAUSTED)
RATE_LIMIT = "rate_limit"
REASON_OF_TIMER = {TimerClass.HINTED: RATE_LIMIT, TimerClass.QUOTA: QUOTA_EXHAUSTED}
LOCKED = ExclusionReason.MODEL_LOCKOUT


class Timer(NamedTuple):
    """One target's timer as the last pass left it (ordered by what is left of it)."""

    seconds: float
    timer: TimerClass
    cause: str  # the reason of the failure that set it
    polling: bool = False  # waiting for another request's probe of the target


def cooldown_wait(context: AttemptContext) -> float | None:
    """Seconds to wait before another pass, or ``None``: no wait (a target is free of timers,
    no timer is worth waiting for, or the settings, the budget or the deadline say no)."""
    settings = _settings(context)
    timers = _timers(context) if settings is not None else None
    if settings is None or timers is None:
        return None
    waitable = [t for t in timers if wait_reason(t.timer, t.cause) == RATE_LIMIT]
    if not waitable:
        return None
    earliest = min(waitable)
    wait_ms = earliest.seconds * 1000 + MARGIN_MS
    budget_left_ms = min(
        settings.budget_ms - context.loop.waited_ms, context.loop.remaining() * 1000
    )
    waits = 0 if earliest.polling else context.loop.waits  # a poll is not one of the waits
    granted, coerced = should_wait(RATE_LIMIT, wait_ms, waits, budget_left_ms, settings)
    if not granted:
        return None
    context.loop.waits += 0 if earliest.polling else 1
    context.loop.waited_ms += coerced
    return coerced / 1000


def _settings(context: AttemptContext) -> ComboCooldownWaitSettings | None:
    """The wait's bounds for this request: a combo's ``comboCooldownWait`` (``None`` when it
    is off); for a single model the same budget and count, each wait at most the attempt
    policy's ``maxRetryAfterWaitMs``."""
    settings = context.facts.snapshot.combo_cooldown_wait
    if context.plan.combo is not None:
        return settings if settings.enabled else None
    return replace(settings, enabled=True, max_wait_ms=context.policy.max_retry_after_wait_ms)


def wait_reason(timer: TimerClass, cause: str) -> str | None:
    """The reason the wait judges for a timer of class ``timer`` set by a failure of reason
    ``cause``: a quota exhaustion stays one, whatever timer it set; otherwise the class says
    (``None``: a class never waited for)."""
    if cause == QUOTA_EXHAUSTED:
        return QUOTA_EXHAUSTED
    return REASON_OF_TIMER.get(timer)


def _timers(context: AttemptContext) -> list[Timer] | None:
    """Each target's timer as the last pass left it (excluded by one, or failed setting one);
    ``None`` when some target has none. A fallback-only step kept back is no target here, nor
    is one that answered that it cannot serve the request (model not found, context length)."""
    excluded = {(e.target.connection.id, e.target.model): e for e in context.loop.exclusions}
    tried = {
        (t.connection.id, t.model) for t, _ in context.loop.attempts[context.loop.pass_start :]
    }
    timers: list[Timer] = []
    for target in context.plan.targets:
        pair = (target.connection.id, target.model)
        exclusion = excluded.get(pair)
        if exclusion is not None and exclusion.held_back:  # waits its turn, not a timer
            continue
        if exclusion is not None and exclusion.retry_after_seconds:
            cause = _lock_reason(context, target) if exclusion.reason == LOCKED else ""
            timer = TimerClass(exclusion.timer)
            timers.append(Timer(exclusion.retry_after_seconds, timer, cause, exclusion.polling))
            continue
        verdict = context.loop.verdict(target) if pair in tried else None
        attribution = verdict.attribution if verdict is not None else None
        if attribution is not None and attribution.cannot_serve:  # not a target to wait for
            continue
        length_ms = verdict and (verdict.hint_ms or (attribution and attribution.lock_ms))
        if attribution is None or attribution.timer is None or not length_ms:
            return None
        timers.append(Timer(length_ms / 1000, attribution.timer, attribution.reason))
    return timers or None


def _lock_reason(context: AttemptContext, target: Target) -> str:
    """The reason of the pair lock that excluded ``target``: the one of its model's slots
    that ends last, as the lockout filter read it in this pass."""
    record = context.loop.lock_records.get(target.connection.id)
    if record is None:
        return ""
    locks = [record.locks[slot] for slot in model_slots(target.model) if slot in record.locks]
    lock = max(locks, key=lambda found: found.until, default=None)
    return lock.reason if lock is not None else ""
