"""Provider circuit breaker: a pure state machine (docs/resilience.md, "Breakers").

Stdlib only. Time is ``now``, epoch seconds as a float, passed to every call; nothing here
reads a clock or storage. Values are frozen: every method returns a new :class:`Breaker` and
the caller decides what to persist.

Transitions (the reason is recorded in the ring of the last 20):

* CLOSED → DEGRADED ``degraded``: failure_count reached the degradation threshold.
* CLOSED/DEGRADED → OPEN ``threshold``: failure_count reached the failure threshold. This is
  checked first, so a degradation threshold ≥ the failure threshold skips DEGRADED.
* DEGRADED → CLOSED ``recovery``: successes brought failure_count down to the degradation
  threshold (each success in CLOSED/DEGRADED takes one failure off).
* OPEN → HALF_OPEN ``cooldown-elapsed``: lazily, on any read once the effective cooldown
  (adaptive backoff, or the failure kind's override) has elapsed since the last failure.
* HALF_OPEN → CLOSED ``probe-success``: a success carrying a probe permit of this generation.
* HALF_OPEN → OPEN ``probe-failed``: a failure while half open; open_cycle_count += 1.
* OPEN → CLOSED ``success-recovery``: a success while open (callers normally drop these).
* any → CLOSED ``manual-reset``.

Every transition bumps the probe generation and clears the probe start. Not a transition: a
HALF_OPEN probe older than the reset timeout is re-armed (its slot comes back and the
generation moves on, so the stale probe's late result is ignored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from resilience.domain.breaker.codec import (
    HISTORY_LIMIT,
    count,
    counts,
    enum_or_none,
    ms,
    str_or_none,
    time_or_none,
    transition_status,
    transition_to_dict,
    transitions_from,
)
from resilience.domain.breaker.policy import HINT_COOLDOWNS, BreakerPolicy
from resilience.domain.breaker.state import BreakerState, FailureKind, Permit, Transition
from resilience.domain.breaker.window import FailureWindow

__all__ = [
    "HINT_COOLDOWNS",
    "HISTORY_LIMIT",
    "Breaker",
    "BreakerPolicy",
    "BreakerState",
    "FailureKind",
    "Permit",
    "Transition",
]


@dataclass(frozen=True, slots=True)
class Breaker:
    """The state and counters of one breaker (a provider, or a provider connection)."""

    state: BreakerState = BreakerState.CLOSED
    failure_count: int = 0
    success_count: int = 0
    last_failure_at: float | None = None
    last_failure_kind: FailureKind | None = None
    kind_failure_counts: Mapping[str, int] = field(default_factory=dict)
    open_cycle_count: int = 0
    half_open_allowed: int = 0
    probe_started_at: float | None = None
    probe_generation: int = 0
    transitions: tuple[Transition, ...] = ()
    window: FailureWindow = field(default_factory=FailureWindow)

    # -- reads --------------------------------------------------------------------------------

    def refreshed(self, policy: BreakerPolicy, now: float) -> Breaker:
        """The lazy refresh: OPEN → HALF_OPEN once cooled down; re-arm a stale probe slot."""
        if self.state == BreakerState.OPEN and self._cooled_down(policy, now):
            half_open = self._moved(BreakerState.HALF_OPEN, now, "cooldown-elapsed")
            return replace(half_open, half_open_allowed=policy.half_open_requests)
        if self.state == BreakerState.HALF_OPEN and self._probe_is_stale(policy, now):
            return replace(
                self,
                half_open_allowed=policy.half_open_requests,
                probe_started_at=None,
                probe_generation=self.probe_generation + 1,
            )
        return self

    def can_execute(self, policy: BreakerPolicy, now: float) -> bool:
        """Whether a request may go through now (read-only: takes no probe slot)."""
        current = self.refreshed(policy, now)
        if current.state == BreakerState.HALF_OPEN:
            return current.half_open_allowed > 0
        return current.state != BreakerState.OPEN

    def retry_after(self, policy: BreakerPolicy, now: float) -> float:
        """Seconds until a request may go through (0 when it may now)."""
        current = self.refreshed(policy, now)
        if current.state in (BreakerState.CLOSED, BreakerState.DEGRADED):
            return 0.0
        if current.state == BreakerState.HALF_OPEN:
            if current.half_open_allowed > 0 or current.probe_started_at is None:
                return 0.0
            return max(0.0, policy.reset_timeout - (now - current.probe_started_at))
        if current.last_failure_at is None:
            return 0.0
        return max(0.0, current.effective_cooldown(policy) - (now - current.last_failure_at))

    def effective_reset_timeout(self, policy: BreakerPolicy) -> float:
        """The reset timeout after adaptive backoff for the current open-cycle count."""
        return _escalated(policy.reset_timeout, policy, self.open_cycle_count)

    def effective_cooldown(self, policy: BreakerPolicy) -> float:
        """How long OPEN lasts: the last failure kind's override if any, else the reset
        timeout; either escalated by open cycles (capped at base × max_backoff_multiplier)."""
        override = _kind_override(policy, self.last_failure_kind)
        if override is None:
            return self.effective_reset_timeout(policy)
        return _escalated(override, policy, self.open_cycle_count)

    @property
    def is_pristine(self) -> bool:
        """CLOSED with no failures or open cycles: behaves like a fresh breaker."""
        return (
            self.state == BreakerState.CLOSED
            and self.failure_count == 0
            and self.open_cycle_count == 0
        )

    # -- transitions --------------------------------------------------------------------------

    def acquire(self, policy: BreakerPolicy, now: float) -> tuple[Breaker, Permit | None]:
        """Take a slot right before dispatch: a permit, or None when the request must not go."""
        current = self.refreshed(policy, now)
        if current.state in (BreakerState.CLOSED, BreakerState.DEGRADED):
            return current, Permit(probe=False, generation=current.probe_generation)
        if current.state == BreakerState.HALF_OPEN and current.half_open_allowed > 0:
            taken = replace(
                current, half_open_allowed=current.half_open_allowed - 1, probe_started_at=now
            )
            return taken, Permit(probe=True, generation=current.probe_generation)
        return current, None

    def released(self, permit: Permit) -> Breaker:
        """A probe that ended with no result (its attempt was cancelled) gives its slot back,
        if it is still this generation's; anything else is unchanged."""
        if self.state != BreakerState.HALF_OPEN or not permit.probe or self._is_stale(permit):
            return self
        return replace(self, half_open_allowed=self.half_open_allowed + 1, probe_started_at=None)

    def after_failure(
        self,
        policy: BreakerPolicy,
        now: float,
        kind: FailureKind | None = None,
        permit: Permit | None = None,
        *,
        counted: bool = True,
        relevant: bool = True,
        windowed: bool = True,
    ) -> Breaker:
        """Record a failure. OPEN, and results of stale probes, change nothing.

        ``relevant``: the failure is not pinned to one pair, so it counts in the failure-rate
        window; ``counted``: it also counts towards the consecutive thresholds
        (a de-duplication window may say no); ``windowed`` false: the call began before the
        window did, so it is no call of the window (nor is its success, had it succeeded).
        """
        current = self.refreshed(policy, now)
        if current._is_stale(permit) or current.state == BreakerState.OPEN:
            return current
        if windowed or not current.window.active(now, policy.window):
            window = current.window.with_call(now, policy.window, failed=relevant)
            current = replace(current, window=window)
        if counted:
            current = current._counted_failure(now, kind)
        elif current.state != BreakerState.HALF_OPEN:
            return current._rate_judged(policy, now)
        return current._judged(policy, now)

    def window_active(self, policy: BreakerPolicy, now: float) -> bool:
        """Whether calls are being counted for the failure-rate window."""
        return self.window.active(now, policy.window)

    def after_success(
        self, policy: BreakerPolicy, now: float, permit: Permit | None = None
    ) -> Breaker:
        """Record a success. HALF_OPEN closes only for a probe permit of this
        generation; results of stale probes change nothing."""
        current = self.refreshed(policy, now)
        if current._is_stale(permit):
            return current
        if current.window.active(now, policy.window):
            window = current.window.with_call(now, policy.window, failed=False)
            current = replace(current, window=window)
        if current.state == BreakerState.OPEN:
            return current._cleared(now, "success-recovery")
        if current.state == BreakerState.HALF_OPEN:
            return current._probe_succeeded(now) if permit and permit.probe else current
        return current._recovered_one(policy, now)

    def reset(self, now: float) -> Breaker:
        """Manual reset: CLOSED with every counter cleared (history kept)."""
        return self._cleared(now, "manual-reset")

    # -- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot, read back by :meth:`from_dict`."""
        return {
            "state": str(self.state),
            "failure_count": self.failure_count,
            "success_count": self.success_count,
            "last_failure_at": self.last_failure_at,
            "last_failure_kind": str_or_none(self.last_failure_kind),
            "kind_failure_counts": dict(self.kind_failure_counts),
            "open_cycle_count": self.open_cycle_count,
            "half_open_allowed": self.half_open_allowed,
            "probe_started_at": self.probe_started_at,
            "probe_generation": self.probe_generation,
            "transitions": [transition_to_dict(step) for step in self.transitions],
            "window": self.window.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, half_open_requests: int = 1) -> Breaker:
        """Restore a snapshot, tolerating missing, unknown or malformed fields.

        Unknown states restore as CLOSED, unknown kinds as None. A HALF_OPEN breaker with no
        probe in flight gets its probe slots back (the probe died with its process).
        """
        breaker = cls(
            state=enum_or_none(BreakerState, data.get("state")) or BreakerState.CLOSED,
            failure_count=count(data.get("failure_count")),
            success_count=count(data.get("success_count")),
            last_failure_at=time_or_none(data.get("last_failure_at")),
            last_failure_kind=enum_or_none(FailureKind, data.get("last_failure_kind")),
            kind_failure_counts=counts(data.get("kind_failure_counts")),
            open_cycle_count=count(data.get("open_cycle_count")),
            half_open_allowed=count(data.get("half_open_allowed")),
            probe_started_at=time_or_none(data.get("probe_started_at")),
            probe_generation=count(data.get("probe_generation")),
            transitions=transitions_from(data.get("transitions")),
            window=FailureWindow.from_dict(data.get("window")),
        )
        if breaker.state == BreakerState.HALF_OPEN and breaker.probe_started_at is None:
            slots = max(breaker.half_open_allowed, half_open_requests)
            return replace(breaker, half_open_allowed=slots)
        return breaker

    def status(self, policy: BreakerPolicy, now: float) -> dict[str, Any]:
        """The health API's status object (times in epoch ms), read on the refreshed breaker."""
        current = self.refreshed(policy, now)
        return {
            "state": str(current.state),
            "failureCount": current.failure_count,
            "lastFailureTime": ms(current.last_failure_at),
            "retryAfterMs": math.ceil(round(current.retry_after(policy, now) * 1000, 6)),
            "lastFailureKind": str_or_none(current.last_failure_kind),
            "openCycleCount": current.open_cycle_count,
            "kindFailureCounts": dict(current.kind_failure_counts),
            "degradationThreshold": policy.effective_degradation_threshold,
            "effectiveResetTimeout": round(current.effective_reset_timeout(policy) * 1000),
            "transitionHistory": [transition_status(step) for step in current.transitions],
        }

    # -- helpers ------------------------------------------------------------------------------

    def _cooled_down(self, policy: BreakerPolicy, now: float) -> bool:
        if self.last_failure_at is None:
            return True
        return now - self.last_failure_at >= self.effective_cooldown(policy)

    def _probe_is_stale(self, policy: BreakerPolicy, now: float) -> bool:
        if self.half_open_allowed > 0:
            return False
        # No slot and no probe start cannot happen through acquire(); re-arm rather than stick.
        started = self.probe_started_at
        return started is None or now - started >= policy.reset_timeout

    def _is_stale(self, permit: Permit | None) -> bool:
        return permit is not None and permit.probe and permit.generation != self.probe_generation

    def _counted_failure(self, now: float, kind: FailureKind | None) -> Breaker:
        counts = dict(self.kind_failure_counts)
        if kind is not None:
            counts[str(kind)] = counts.get(str(kind), 0) + 1
        return replace(
            self,
            failure_count=self.failure_count + 1,
            last_failure_at=now,
            last_failure_kind=kind,
            kind_failure_counts=counts,
        )

    def _judged(self, policy: BreakerPolicy, now: float) -> Breaker:
        # The open check comes before the degraded one (a local profile skips DEGRADED).
        if self.state == BreakerState.HALF_OPEN:
            reopened = replace(self, open_cycle_count=self.open_cycle_count + 1)
            return reopened._moved(BreakerState.OPEN, now, "probe-failed")
        if self.failure_count >= policy.failure_threshold:
            return self._moved(BreakerState.OPEN, now, "threshold")
        if self.window.tripped(policy.minimum_calls, policy.failure_rate_percent):
            return self._moved(BreakerState.OPEN, now, "failure-rate")
        degrading = self.failure_count >= policy.effective_degradation_threshold
        if self.state == BreakerState.CLOSED and degrading:
            return self._moved(BreakerState.DEGRADED, now, "degraded")
        return self

    def _rate_judged(self, policy: BreakerPolicy, now: float) -> Breaker:
        if self.state in (BreakerState.CLOSED, BreakerState.DEGRADED) and self.window.tripped(
            policy.minimum_calls, policy.failure_rate_percent
        ):
            return self._moved(BreakerState.OPEN, now, "failure-rate")
        return self

    def _probe_succeeded(self, now: float) -> Breaker:
        closed = replace(
            self,
            success_count=self.success_count + 1,
            failure_count=0,
            last_failure_kind=None,
            kind_failure_counts={},
            open_cycle_count=0,
        )
        return closed._moved(BreakerState.CLOSED, now, "probe-success")

    def _recovered_one(self, policy: BreakerPolicy, now: float) -> Breaker:
        recovered = replace(self, failure_count=max(0, self.failure_count - 1))
        back_in_band = recovered.failure_count <= policy.effective_degradation_threshold
        if recovered.state == BreakerState.DEGRADED and back_in_band:
            return recovered._moved(BreakerState.CLOSED, now, "recovery")
        return recovered

    def _cleared(self, now: float, reason: str) -> Breaker:
        cleared = replace(
            self,
            failure_count=0,
            success_count=0,
            last_failure_at=None,
            last_failure_kind=None,
            kind_failure_counts={},
            open_cycle_count=0,
        )
        return cleared._moved(BreakerState.CLOSED, now, reason)

    def _moved(self, to: BreakerState, now: float, reason: str) -> Breaker:
        step = Transition(self.state, to, now, self.failure_count, reason)
        return replace(
            self,
            state=to,
            window=self.window if to == BreakerState.DEGRADED else FailureWindow(),
            half_open_allowed=0,
            probe_started_at=None,
            probe_generation=self.probe_generation + 1,
            transitions=(*self.transitions, step)[-HISTORY_LIMIT:],
        )


# -- module helpers ---------------------------------------------------------------------------

_E = TypeVar("_E", bound=StrEnum)


def _escalated(base: float, policy: BreakerPolicy, open_cycles: int) -> float:
    exponent = open_cycles - policy.backoff_escalation_count
    if exponent <= 0:
        return base
    return base * min(1 << min(exponent, 62), policy.max_backoff_multiplier)


def _kind_override(policy: BreakerPolicy, kind: FailureKind | None) -> float | None:
    value = None if kind is None else policy.cooldown_by_kind.get(str(kind))
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return float(value)
