"""Shared inputs of the pure breaker tests: the profile policies, ``T0`` and value builders."""

from __future__ import annotations

from resilience.domain.breaker.machine import (
    Breaker,
    BreakerPolicy,
    BreakerState,
    FailureKind,
    Permit,
)
from resilience.domain.profiles import PROFILES, ProfileName

CLOSED, DEGRADED = BreakerState.CLOSED, BreakerState.DEGRADED
OPEN, HALF_OPEN = BreakerState.OPEN, BreakerState.HALF_OPEN
T0 = 1_700_000_000.0

POLICIES = {name: BreakerPolicy.from_profile(PROFILES[name]) for name in ProfileName}
API = POLICIES[ProfileName.APIKEY]
OAUTH = POLICIES[ProfileName.OAUTH]
LOCAL = POLICIES[ProfileName.LOCAL]
HINTS = BreakerPolicy.from_profile(PROFILES[ProfileName.APIKEY], use_429_hints=True)


def failed(
    policy: BreakerPolicy,
    times: int,
    now: float = T0,
    start: Breaker | None = None,
    kind: FailureKind | None = None,
) -> Breaker:
    """``start`` (a fresh breaker by default) after ``times`` failures at ``now``."""
    breaker = start or Breaker()
    for _ in range(times):
        breaker = breaker.after_failure(policy, now, kind)
    return breaker


def opened(policy: BreakerPolicy, now: float = T0) -> Breaker:
    """A breaker that just opened at ``now``."""
    breaker = failed(policy, policy.failure_threshold, now)
    assert breaker.state == OPEN
    return breaker


def probing(policy: BreakerPolicy, breaker: Breaker, now: float) -> tuple[Breaker, Permit]:
    """Take the probe slot at ``now``; the breaker must be half open by then."""
    breaker, permit = breaker.acquire(policy, now)
    assert permit is not None and permit.probe
    return breaker, permit


def with_cycles(breaker: Breaker, cycles: int) -> Breaker:
    """``breaker`` as if it had already been through ``cycles`` open cycles."""
    return Breaker.from_dict({**breaker.to_dict(), "open_cycle_count": cycles})


def reasons(breaker: Breaker) -> list[str]:
    """The reason of every recorded transition, oldest first."""
    return [step.reason for step in breaker.transitions]
