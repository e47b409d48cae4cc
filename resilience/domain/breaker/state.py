"""The breaker's vocabulary: states, failure kinds, transitions and permits (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class BreakerState(StrEnum):
    """The four breaker states; DEGRADED still passes traffic."""

    CLOSED = "closed"
    DEGRADED = "degraded"
    OPEN = "open"
    HALF_OPEN = "half_open"


class FailureKind(StrEnum):
    """What kind of failure was recorded (only matters with kind cooldowns)."""

    RATE_LIMIT = "rate_limit"
    QUOTA_EXHAUSTED = "quota_exhausted"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class Transition:
    """One entry of the transition history; ``failure_count`` is the count after the change."""

    from_state: BreakerState
    to_state: BreakerState
    at: float
    failure_count: int
    reason: str


@dataclass(frozen=True, slots=True)
class Permit:
    """A dispatch slot from :meth:`Breaker.acquire`; hand it back with the result."""

    probe: bool
    generation: int
