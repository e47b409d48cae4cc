"""The provider cooldown window gate, as pure arithmetic (docs/resilience.md, "Window gate").

Cross-request memory of failing combo targets, opt-in. A *provider* cools down once its
failures inside the profile's window reach the profile's threshold, for ``providerCooldownMs``
after the last failure. A *connection* cools down after each failure for
``min(minRetry × 2^min(count − 1, 10), maxRetry)``. A success clears both.
"""

from __future__ import annotations

from dataclasses import dataclass

from resilience.domain.profiles import ProviderProfile

MAX_EXPONENT = 10
RETENTION_FLOOR_SECONDS = 30 * 60.0


@dataclass(frozen=True, slots=True)
class WindowGatePolicy:
    """The numbers of one provider's gate, in seconds."""

    failure_threshold: int
    failure_window: float
    provider_cooldown: float
    min_retry_cooldown: float
    max_retry_cooldown: float

    @classmethod
    def from_profile(
        cls, profile: ProviderProfile, *, min_retry_ms: int, max_retry_ms: int
    ) -> WindowGatePolicy:
        """The profile's provider-level numbers with the operator's connection backoff."""
        return cls(
            failure_threshold=profile.provider_failure_threshold,
            failure_window=profile.provider_failure_window_ms / 1000,
            provider_cooldown=profile.provider_cooldown_ms / 1000,
            min_retry_cooldown=min_retry_ms / 1000,
            max_retry_cooldown=max(min_retry_ms, max_retry_ms) / 1000,
        )

    @property
    def retention(self) -> float:
        """How long a failure is remembered at all."""
        return max(RETENTION_FLOOR_SECONDS, self.max_retry_cooldown, self.failure_window)


def provider_remaining(
    failures_in_window: int, last_failure_at: float | None, policy: WindowGatePolicy, now: float
) -> float:
    """Seconds the provider still cools down; 0 below the threshold or once it elapsed."""
    if last_failure_at is None or failures_in_window < policy.failure_threshold:
        return 0.0
    return max(0.0, policy.provider_cooldown - (now - last_failure_at))


def connection_cooldown(failure_count: int, policy: WindowGatePolicy) -> float:
    """The connection's cooldown after ``failure_count`` consecutive failures."""
    if failure_count <= 0:
        return 0.0
    exponent = min(failure_count - 1, MAX_EXPONENT)
    return min(policy.min_retry_cooldown * float(2**exponent), policy.max_retry_cooldown)


def connection_remaining(
    failure_count: int, last_failure_at: float | None, policy: WindowGatePolicy, now: float
) -> float:
    """Seconds the connection still cools down."""
    if last_failure_at is None:
        return 0.0
    return max(0.0, connection_cooldown(failure_count, policy) - (now - last_failure_at))
