"""Availability-first numbers (spec decisions 14-16 and 25), pure.

A lone transient failure leaves no timer (the attempt policy retries it or fails over);
``consecutive_failures`` in a row take the (connection, model) pair out, for at most
``transient_cooldown_cap_ms``; when every target of a request is excluded only by self-set
timers, ``panic_enabled`` allows one attempt anyway. ``transient_cooldown_base_ms`` (at most
the cap) is the first self-set timer of a run.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONSECUTIVE_FAILURES = 3
DEFAULT_TRANSIENT_COOLDOWN_BASE_MS = 2_000
DEFAULT_TRANSIENT_COOLDOWN_CAP_MS = 30_000


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
