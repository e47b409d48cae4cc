"""Availability-first numbers, pure.

A lone transient failure leaves no timer (the attempt policy retries it or fails over);
``consecutive_failures`` in a row take the (connection, model) pair out; when every target of a
request is excluded only by self-set timers, ``panic_enabled`` allows one attempt anyway.

Every timer the gateway sets itself after transient failures follows the upstream's recovery:
it starts at ``transient_cooldown_base_ms`` and doubles with each consecutive
failed probe, never past ``transient_cooldown_cap_ms``; a success starts it again from the
base. A target is so back in service about the outage's own length (plus the base) after the
outage ends, and never later than the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from resilience.domain.classify.classification import Classification

DEFAULT_CONSECUTIVE_FAILURES = 3
DEFAULT_TRANSIENT_COOLDOWN_BASE_MS = 2_000
DEFAULT_TRANSIENT_COOLDOWN_CAP_MS = 30_000
MAX_DOUBLINGS = 64  # 2^64 times the smallest base is past every cap


def transient_cooldown_seconds(
    failed_probes: int, *, base_seconds: float, cap_seconds: float
) -> float:
    """A self-set timer after ``failed_probes`` consecutive failed probes:
    ``base × 2^failed_probes``, at most ``cap_seconds``."""
    doublings = min(max(failed_probes, 0), MAX_DOUBLINGS)
    return min(math.ldexp(base_seconds, doublings), cap_seconds)


@dataclass(frozen=True, slots=True)
class AvailabilitySettings:
    """The ``availability`` settings section, already in range."""

    consecutive_failures: int = DEFAULT_CONSECUTIVE_FAILURES
    transient_cooldown_cap_ms: int = DEFAULT_TRANSIENT_COOLDOWN_CAP_MS
    panic_enabled: bool = True
    transient_cooldown_base_ms: int = DEFAULT_TRANSIENT_COOLDOWN_BASE_MS

    @property
    def transient_cap_seconds(self) -> float:
        return self.transient_cooldown_cap_ms / 1000

    @property
    def transient_base_seconds(self) -> float:
        return self.transient_cooldown_base_ms / 1000

    def transient_cooldown_seconds(self, failed_probes: int) -> float:
        """The self-set timer after ``failed_probes`` consecutive failed probes."""
        return transient_cooldown_seconds(
            failed_probes,
            base_seconds=self.transient_base_seconds,
            cap_seconds=self.transient_cap_seconds,
        )

    def self_set_cooldown(self, found: Classification, level: int) -> Classification:
        """A connection cooldown the gateway sets itself: the base, doubled for each earlier
        cooldown of the run (the backoff ``level``: each one ended in a failed try), never
        past the cap; the level stops rising once the cap is reached. A success clears the
        level, so the next run starts from the base again."""
        seconds = self.transient_cooldown_seconds(level)
        rising = seconds < self.transient_cap_seconds
        return replace(
            found,
            cooldown_ms=round(seconds * 1000),
            new_backoff_level=level + 1 if rising else level,
            base_cooldown_ms=self.transient_cooldown_base_ms,
        )
