"""The combo cooldown-aware wait (reference-part2 §4; spec decisions 11 and 20, step 3): when a
pass over a combo's plan ended with every target behind a timer (excluded by one, or failed
setting one), wait for the one that ends first and try again, instead of answering 429 or 503
at once. A single model keeps only the attempt policy's wait for a short ``Retry-After``.

Decision 20 waits for upstream-hinted timers only. The timer's class stands for the reason
§4.3 judges: an upstream hint (``Retry-After``, reset headers) is ``rate_limit`` (waited for);
a quota timer is ``quota_exhausted`` (never: its reset is hours away). A quota exhaustion is
not waited for even when its answer carried a short ``Retry-After`` (the pair is locked for
the hint, but a quota rarely comes back in seconds): the reason of the failure, or of the lock
it left, wins over the timer's class. Self-set timers are the panic attempt's (decision 15),
an open breaker answers 503 ``provider_circuit_open`` or joins ``all_targets_cooling_down``,
and operator and terminal timers are never waited for: the shortest timer of another class
means no wait. The wait is the timer's remainder plus :data:`MARGIN_MS`, within
``comboCooldownWait`` (``maxWaitMs`` per wait, ``maxAttempts`` waits, ``budgetMs`` in all) and
the request's deadline.

Before each wait the loop awaits ``AttemptContext.before_wait``: nothing by default; for a
streaming client, the consumer's keep-alive (the answer's head and an SSE comment at once, so
that a long wait does not trip the client's first-byte timeout; §4.7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from resilience.domain.attribution import TimerClass
from resilience.domain.classification import Reason
from resilience.domain.combo_cooldown_wait import should_wait
from resilience.domain.lockout import model_slots
from routing.domain.vocabulary import ExclusionReason

if TYPE_CHECKING:
    from routing.attempts import AttemptContext
    from routing.domain.planning import Target

MARGIN_MS = 50
QUOTA_EXHAUSTED = str(Reason.QUOTA_EXHAUSTED)
REASON_OF_TIMER = {TimerClass.HINTED: "rate_limit", TimerClass.QUOTA: QUOTA_EXHAUSTED}
Timer = tuple[float, TimerClass, str]  # seconds left, its class, the failure's reason
LOCKED = ExclusionReason.MODEL_LOCKOUT


def cooldown_wait(context: AttemptContext) -> float | None:
    """Seconds to wait before another pass, or ``None``: no wait (a target is free of timers,
    no timer is worth waiting for, or the settings, the budget or the deadline say no)."""
    settings = context.snapshot.combo_cooldown_wait
    if not settings.enabled or context.plan.combo is None:  # a single model: the attempt
        return None  # policy's short Retry-After wait is its only one
    timers = _timers(context)
    if timers is None:
        return None
    seconds, timer, cause = min(timers)
    reason = wait_reason(timer, cause)
    wait_ms = seconds * 1000 + MARGIN_MS
    budget_left_ms = min(settings.budget_ms - context.waited_ms, context.remaining() * 1000)
    granted, coerced = should_wait(reason, wait_ms, context.waits, budget_left_ms, settings)
    if not granted:
        return None
    context.waits += 1
    context.waited_ms += coerced
    return coerced / 1000


async def no_keep_alive() -> None:
    """What happens before a wait by default: nothing. A streaming consumer replaces it with
    its keep-alive (``AttemptContext.before_wait``; reference-part2 §4.7)."""


def wait_reason(timer: TimerClass, cause: str) -> str | None:
    """The reason §4.3 judges for a timer of class ``timer`` set by a failure of reason
    ``cause``: a quota exhaustion stays one, whatever timer it set; otherwise the class says
    (``None``: a class never waited for)."""
    if cause == QUOTA_EXHAUSTED:
        return QUOTA_EXHAUSTED
    return REASON_OF_TIMER.get(timer)


def _timers(context: AttemptContext) -> list[Timer] | None:
    """Each target's timer as the last pass left it (excluded by one, or failed setting one);
    ``None`` when some target has none. A fallback-only step kept back is no target here, nor
    is one that answered that it cannot serve the request (model not found, context length)."""
    excluded = {(e.target.connection.id, e.target.model): e for e in context.exclusions}
    tried = {(t.connection.id, t.model) for t, _ in context.attempts[context.pass_start :]}
    timers: list[Timer] = []
    for target in context.plan.targets:
        pair = (target.connection.id, target.model)
        exclusion = excluded.get(pair)
        if exclusion is not None and exclusion.held_back:  # waits its turn, not a timer
            continue
        if exclusion is not None and exclusion.retry_after_seconds:
            cause = _lock_reason(context, target) if exclusion.reason == LOCKED else ""
            timers.append((exclusion.retry_after_seconds, TimerClass(exclusion.timer), cause))
            continue
        verdict = context.verdict(target) if pair in tried else None
        attribution = verdict.attribution if verdict is not None else None
        if attribution is not None and attribution.cannot_serve:  # not a target to wait for
            continue
        length_ms = verdict and (verdict.hint_ms or (attribution and attribution.lock_ms))
        if attribution is None or attribution.timer is None or not length_ms:
            return None
        timers.append((length_ms / 1000, attribution.timer, attribution.reason))
    return timers or None


def _lock_reason(context: AttemptContext, target: Target) -> str:
    """The reason of the pair lock that excluded ``target``: the one of its model's slots
    that ends last, as the lockout filter read it in this pass."""
    record = context.lock_records.get(target.connection.id)
    if record is None:
        return ""
    locks = [record.locks[slot] for slot in model_slots(target.model) if slot in record.locks]
    lock = max(locks, key=lambda found: found.until, default=None)
    return lock.reason if lock is not None else ""
