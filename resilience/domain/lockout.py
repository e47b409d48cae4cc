"""Model lockout (pair locks) as pure arithmetic (docs/resilience.md, "Pair locks").

One failing model never takes its whole connection down: a lock on (provider, connection,
model) makes routing skip that model on that connection while its other models keep serving.

Lock keys: 429/403/402 lock the model's quota family and 404 the bare model (the same key here:
quota families are provider quirks, out of scope); any other status, including the gateway's
own quality-validation 502, locks the exact tuple only; an explicit scope wins. A failure
inside the window (the breaker reset timeout, or 30 min) escalates the cooldown
``base × 2^min(n − 1, maxBackoffSteps)`` capped at ``maxCooldownMs``; an authoritative upstream
reset bypasses the cap; ``quota_exhausted`` without a known reset locks until local midnight
(within the cap);
a longer existing lock is kept. Each success halves the failure count; at 0 the failure state
and the lock are both removed.

Which failures count: a transient failure (docs/resilience.md, "Pair locks") counts towards its
pair's run only when it carries no status (a reset, a refused connection) or its status is one
of ``modelLockout.errorCodes`` (``counts_toward_pair``; the gateway reports a timeout as 504). A
404 is never one: a model the upstream does not know is the request's mistake, not the pair's
health. There is no switch: the lockout always applies (the reference's ``modelLockout.enabled``
is retired).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from resilience.domain.attribution import TimerClass
from resilience.domain.availability import AvailabilitySettings

# The statuses the gateway treats as transient trouble of a pair: a timeout, a rate limit
# without a hint, server errors and overload (the reference's list without 404, which is the
# request's mistake, and 403, which is account-wide; with 408, 500 and 529).
DEFAULT_ERROR_CODES = (408, 429, 500, 502, 503, 504, 529)
NEVER_COUNTED_STATUSES = frozenset({404})
DEFAULT_WINDOW_SECONDS = 30 * 60.0
DAY_SECONDS = 24 * 3600.0
QUOTA_FAMILY_STATUSES = frozenset({429, 403, 402})


class LockScope(StrEnum):
    """Which key a failure locks."""

    QUOTA_FAMILY = "quota_family"
    BARE = "bare"
    EXACT = "exact"


@dataclass(frozen=True, slots=True)
class LockoutSettings:
    """The ``modelLockout`` card, already normalised."""

    error_codes: tuple[int, ...] = DEFAULT_ERROR_CODES
    base_cooldown_ms: int = 120_000
    max_cooldown_ms: int = 1_800_000
    max_backoff_steps: int = 10
    use_exponential_backoff: bool = True


def lock_scope(status: int, explicit: LockScope | None = None) -> LockScope:
    """The lock scope by status: an explicit caller scope always wins."""
    if explicit is not None:
        return explicit
    if status in QUOTA_FAMILY_STATUSES:
        return LockScope.QUOTA_FAMILY
    if status == 404:
        return LockScope.BARE
    return LockScope.EXACT


def model_slot(model: str, scope: LockScope) -> str:
    """The key of a model's lock inside its connection's record."""
    if scope is LockScope.EXACT:
        return f"x:{model.strip().lower()}"
    return f"m:{model}"


def model_slots(model: str) -> tuple[str, str]:
    """Every key that can lock ``model`` (lookups check all shapes)."""
    return model_slot(model, LockScope.BARE), model_slot(model, LockScope.EXACT)


@dataclass(frozen=True, slots=True)
class Lock:
    """An active lock on one model slot; times in epoch seconds."""

    reason: str
    until: float
    locked_at: float
    failure_count: int
    timer: str = ""  # the timer class (resilience.domain.attribution.TimerClass); "" unknown

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)

    @property
    def self_set(self) -> bool:
        return self.timer == TimerClass.SELF_SET

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "until": self.until,
            "at": self.locked_at,
            "n": self.failure_count,
            "timer": self.timer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Lock:
        return cls(
            str(data["reason"]),
            float(data["until"]),
            float(data["at"]),
            int(data["n"]),
            str(data.get("timer") or ""),
        )


@dataclass(frozen=True, slots=True)
class FailureState:
    """The escalation memory of one slot."""

    failure_count: int
    last_failure_at: float
    window: float
    last_cooldown: float
    consecutive: int = 0  # transient failures in a row; a success resets it
    probes: int = 0  # failed probes since the run first locked the pair
    # The last hinted refusal's hint ends then (epoch seconds; 0: none since the last success).
    hinted_until: float = 0.0
    # A hinted lock whose end no success has followed yet: its start (0: none). When the lock
    # ends, one request probes the pair and the others wait for its answer.
    hinted_lock_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {
            "n": self.failure_count,
            "last": self.last_failure_at,
            "window": self.window,
            "cooldown": self.last_cooldown,
            "run": self.consecutive,
            "probes": self.probes,
        }
        if self.hinted_until:
            data["hinted"] = self.hinted_until
        if self.hinted_lock_at:
            data["hinted_lock"] = self.hinted_lock_at
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailureState:
        return cls(
            int(data["n"]),
            float(data["last"]),
            float(data["window"]),
            float(data["cooldown"]),
            int(data.get("run") or 0),
            int(data.get("probes") or 0),
            float(data.get("hinted") or 0.0),
            float(data.get("hinted_lock") or 0.0),
        )

    def hinted_evidence(self, now: float) -> bool:
        """Whether a hinted refusal at ``now`` is the pair's second in a row: the previous
        completed attempt was refused with a hint that still runs, or was the probe of a
        hinted lock (no success completed since, or the state would have been reset)."""
        return self.hinted_until >= now or self.hinted_lock_at > 0

    def inside(self, now: float) -> bool:
        """Whether a failure at ``now`` continues this state's run (its window)."""
        return now - self.last_failure_at <= self.window + self.last_cooldown


@dataclass(frozen=True, slots=True)
class LockRequest:
    """One failure to record against a slot."""

    reason: str
    exact_cooldown_ms: int | None = None  # a known cooldown (upstream hint, rule cooldown)
    exact_is_upstream_reset: bool = False  # authoritative: bypasses the cap
    window_seconds: float = 0.0  # the breaker reset timeout; 0 → 30 min
    timer: str = ""  # the class of the timer this lock is


def seconds_until_midnight(now: float, tz: dt.tzinfo) -> float:
    """Seconds to the next local midnight; 24 h when DST makes the figure implausible."""
    local = dt.datetime.fromtimestamp(now, tz)
    midnight = (local + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    seconds = midnight.timestamp() - now
    return seconds if 0 < seconds <= 25 * 3600 else DAY_SECONDS


def escalated_seconds(count: int, settings: LockoutSettings) -> float:
    """``base × 2^min(n − 1, steps)`` capped at the max (the steps cap applies)."""
    base = settings.base_cooldown_ms / 1000
    if not settings.use_exponential_backoff:
        return min(base, settings.max_cooldown_ms / 1000)
    exponent = min(max(count - 1, 0), settings.max_backoff_steps)
    return min(base * float(2**exponent), settings.max_cooldown_ms / 1000)


def _count(previous: FailureState | None, now: float) -> int:
    if previous is None:
        return 1
    inside = now - previous.last_failure_at <= previous.window + previous.last_cooldown
    return previous.failure_count + 1 if inside else 1


def _cooldown(request: LockRequest, count: int, settings: LockoutSettings) -> float:
    exact = request.exact_cooldown_ms
    if exact is not None and exact > 0:
        uncapped = request.exact_is_upstream_reset
        return exact / 1000 if uncapped else min(exact, settings.max_cooldown_ms) / 1000
    return escalated_seconds(count, settings)


def record_failure(
    previous: FailureState | None,
    lock: Lock | None,
    request: LockRequest,
    settings: LockoutSettings,
    *,
    now: float,
    tz: dt.tzinfo,
) -> tuple[FailureState, Lock]:
    """The slot's failure state and lock after one failure."""
    if request.reason == "quota_exhausted" and not request.exact_cooldown_ms:
        # Until local midnight, within maxCooldownMs like any exact value that is not an
        # upstream reset.
        midnight_ms = int(seconds_until_midnight(now, tz) * 1000)
        request = replace(request, exact_cooldown_ms=midnight_ms, exact_is_upstream_reset=False)
    count = _count(previous, now)
    cooldown = _cooldown(request, count, settings)
    window = request.window_seconds if request.window_seconds > 0 else DEFAULT_WINDOW_SECONDS
    state = FailureState(count, now, window, cooldown)
    if lock is not None and lock.until > now + cooldown:  # keep the longer lock
        return state, replace(lock, failure_count=max(lock.failure_count, count))
    return state, Lock(request.reason, now + cooldown, now, count, request.timer)


def record_hinted(
    previous: FailureState | None,
    lock: Lock | None,
    request: LockRequest,
    settings: LockoutSettings,
    *,
    now: float,
    tz: dt.tzinfo,
    short: bool,
) -> tuple[FailureState, Lock | None]:
    """One refusal that said when to come back (a ``Retry-After``, reset headers or reset
    text), for ``request.exact_cooldown_ms``.

    A ``short`` hint (within the attempt policy's wait) is the request's own business: the
    request that got it waits it out or fails over, and the pair stays open to others, since
    one rate-limited call among many says little about the next. It locks the pair for
    everyone only on evidence of a real limit: the pair's previous completed attempt was a
    hinted refusal too, its hint still running (:meth:`FailureState.hinted_evidence`). A
    long hint, or a quota, locks the pair at once. Either way the hint is remembered, so that
    the next refusal can be judged."""
    hint_ends = now + (request.exact_cooldown_ms or 0) / 1000
    evidence = previous is not None and previous.hinted_evidence(now)
    if short and not evidence:
        state = previous or FailureState(0, now, DEFAULT_WINDOW_SECONDS, 0.0)
        return replace(state, hinted_until=hint_ends), lock
    state, placed = record_failure(previous, lock, request, settings, now=now, tz=tz)
    return replace(state, hinted_until=hint_ends, hinted_lock_at=placed.locked_at), placed


def probe_settled(previous: FailureState | None) -> FailureState | None:
    """The pair's state after an attempt that was neither a success nor a hinted refusal (a
    5xx, a timeout): a hinted lock's probe, if one was out, has had its answer."""
    if previous is None or not previous.hinted_lock_at:
        return previous
    return replace(previous, hinted_lock_at=0.0, hinted_until=0.0)


def record_transient(
    previous: FailureState | None,
    lock: Lock | None,
    *,
    reason: str,
    availability: AvailabilitySettings,
    now: float,
    window_seconds: float = 0.0,
    probe: bool = False,
) -> tuple[FailureState, Lock | None]:
    """One transient failure of a pair.

    Counted only, until ``availability.consecutive_failures`` in a row: then the pair is
    locked for the availability base. Once the run has locked the pair, each failure of its
    probe (the request let through when the lock ended, or a panic attempt through the lock:
    ``probe``) doubles the lock, never past the cap; ``FailureState.probes`` remembers how
    many failed. A failure while the lock still holds that was no probe (an attempt that
    started before the lock) is counted and leaves the lock as it is. A longer lock already
    in place is kept.
    """
    prior = previous if previous is not None and previous.inside(now) else None
    count = prior.failure_count + 1 if prior else 1
    run = prior.consecutive + 1 if prior else 1
    window = window_seconds if window_seconds > 0 else DEFAULT_WINDOW_SECONDS
    threshold = availability.consecutive_failures
    if run < threshold:
        last_cooldown = prior.last_cooldown if prior else 0.0
        return FailureState(count, now, window, last_cooldown, run), lock
    held = lock is not None and lock.until > now
    if prior is None or prior.consecutive < threshold:
        probes = 0  # the run reaches the threshold: the first lock
    elif probe or not held:
        probes = prior.probes + 1  # a failed probe
    else:
        return FailureState(count, now, window, prior.last_cooldown, run, prior.probes), lock
    cooldown = availability.transient_cooldown_seconds(probes)
    state = FailureState(count, now, window, cooldown, run, probes)
    if lock is not None and lock.until > now + cooldown:
        return state, lock
    return state, Lock(reason, now + cooldown, now, run, TimerClass.SELF_SET)


def decay(previous: FailureState | None) -> FailureState | None:
    """A success halves the failure count and ends the run (so the next lock starts again
    from the base) and any hinted evidence; ``None`` at 0 (the lock goes too)."""
    if previous is None:
        return None
    halved = previous.failure_count // 2
    if halved <= 0:
        return None
    return replace(
        previous,
        failure_count=halved,
        consecutive=0,
        probes=0,
        hinted_until=0.0,
        hinted_lock_at=0.0,
    )


def reason_for_status(status: int) -> str:
    """The combo engine's lock reason."""
    return {429: "rate_limit", 403: "quota_exhausted"}.get(status, "unknown")


def counts_toward_pair(settings: LockoutSettings, status: int | None) -> bool:
    """Whether a transient failure counts towards its pair's run of failures: always without
    a status (a reset, a refused connection), else when ``errorCodes`` lists the status (never a
    404)."""
    if not status:
        return True
    return status in settings.error_codes and status not in NEVER_COUNTED_STATUSES


def selected_cooldown_ms(classified_ms: int, settings: LockoutSettings) -> int:
    """The reference's selectLockoutCooldownMs: a longer classifier cooldown wins; otherwise
    0 lets the exponential scaler work (or the base when the scaler is off)."""
    if classified_ms > settings.base_cooldown_ms:
        return classified_ms
    return 0 if settings.use_exponential_backoff else settings.base_cooldown_ms
