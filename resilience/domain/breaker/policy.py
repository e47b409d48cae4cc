"""The breaker's policy: how it trips and recovers, by run or by failure
rate (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from resilience.domain.profiles import ProviderProfile

_T = TypeVar("_T")

HINT_COOLDOWNS: Mapping[str, float] = {"rate_limit": 60.0, "quota_exhausted": 3600.0}


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """How a breaker trips and recovers; times in seconds."""

    failure_threshold: int = 5
    reset_timeout: float = 30.0
    half_open_requests: int = 1
    degradation_threshold: int | None = None  # None: ceil(60 % of failure_threshold), min 1
    max_backoff_multiplier: int = 16
    backoff_escalation_count: int = 3
    cooldown_by_kind: Mapping[str, float] = field(default_factory=dict)
    window: float = 60.0  # the failure-rate window, seconds
    minimum_calls: int = 10
    failure_rate_percent: int = 50

    def __post_init__(self) -> None:
        if self.failure_threshold < 1 or self.half_open_requests < 1:
            raise ValueError("failure_threshold and half_open_requests must be at least 1")
        if self.reset_timeout < 0 or self.max_backoff_multiplier < 1:
            raise ValueError("reset_timeout must be >= 0 and max_backoff_multiplier >= 1")

    @property
    def effective_degradation_threshold(self) -> int:
        """The failure count that enters DEGRADED: explicit, or ceil(60 % of the threshold)."""
        if self.degradation_threshold is not None:
            return max(1, self.degradation_threshold)
        return max(1, (3 * self.failure_threshold + 4) // 5)

    @classmethod
    def from_profile(
        cls,
        profile: ProviderProfile,
        *,
        failure_threshold: int | None = None,
        degradation_threshold: int | None = None,
        reset_timeout_ms: int | None = None,
        use_429_hints: bool = False,
        window_ms: int = 60_000,
        minimum_calls: int = 10,
        failure_rate_percent: int = 50,
    ) -> BreakerPolicy:
        """The profile's breaker numbers, overridden by the operator's settings when given.

        ``use_429_hints`` is the upstream-429 hint mode: the last failure's kind picks the
        cooldown (rate limit 60 s, quota exhausted 1 h) instead of the reset timeout.
        """
        threshold = _pick(failure_threshold, profile.circuit_breaker_threshold)
        reset_ms = _pick(reset_timeout_ms, profile.circuit_breaker_reset_ms)
        return cls(
            failure_threshold=max(1, threshold),
            reset_timeout=max(0, reset_ms) / 1000,
            degradation_threshold=_pick(degradation_threshold, profile.degradation_threshold),
            max_backoff_multiplier=max(1, profile.max_backoff_multiplier),
            backoff_escalation_count=profile.backoff_escalation_count,
            cooldown_by_kind=dict(HINT_COOLDOWNS) if use_429_hints else {},
            window=max(1, window_ms) / 1000,
            minimum_calls=max(1, minimum_calls),
            failure_rate_percent=min(100, max(1, failure_rate_percent)),
        )


def _pick(override: _T | None, default: _T) -> _T:
    return default if override is None else override
