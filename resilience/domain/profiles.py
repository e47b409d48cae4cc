"""Provider profiles: per auth category, the breaker and window-gate numbers (pure).

The table reproduces the reference's ``PROVIDER_PROFILES``. Each number
can be overridden by its environment variable (a non-negative number; anything else keeps the
default). Operator settings (``providerBreaker.*``) then override the three editable breaker
fields; see ``resilience.domain.settings.document``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum


class ProfileName(StrEnum):
    """The three profiles; a provider's category picks one."""

    OAUTH = "oauth"
    APIKEY = "apikey"
    LOCAL = "local"


# Provider.category values (routing vocabulary) → profile names used by settings and env.
CATEGORY_PROFILES = {
    "oauth": ProfileName.OAUTH,
    "api_key": ProfileName.APIKEY,
    "local": ProfileName.LOCAL,
}


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """All per-category numbers; times in milliseconds as in the reference."""

    transient_cooldown_ms: int
    rate_limit_cooldown_ms: int
    max_backoff_level: int
    circuit_breaker_threshold: int
    circuit_breaker_reset_ms: int
    degradation_threshold: int | None  # None: derived, ceil(60 % of the threshold)
    max_backoff_multiplier: int
    backoff_escalation_count: int
    provider_failure_threshold: int
    provider_failure_window_ms: int
    provider_cooldown_ms: int

    @property
    def effective_degradation_threshold(self) -> int:
        if self.degradation_threshold is not None:
            return self.degradation_threshold
        return max(1, math.ceil(self.circuit_breaker_threshold * 0.6))


PROFILES: dict[ProfileName, ProviderProfile] = {
    ProfileName.OAUTH: ProviderProfile(5_000, 60_000, 8, 8, 60_000, 5, 8, 2, 10, 900_000, 300_000),
    ProfileName.APIKEY: ProviderProfile(3_000, 0, 5, 12, 30_000, 7, 4, 3, 15, 1_800_000, 600_000),
    ProfileName.LOCAL: ProviderProfile(2_000, 5_000, 3, 2, 15_000, None, 16, 3, 2, 300_000, 60_000),
}

_ENV_TOKEN = {ProfileName.OAUTH: "OAUTH", ProfileName.APIKEY: "API_KEY", ProfileName.LOCAL: "LOCAL"}

# field → environment variable pattern ({} is OAUTH / API_KEY / LOCAL)
ENV_OVERRIDES = {
    "circuit_breaker_threshold": "OMNIROUTE_CIRCUIT_BREAKER_{}_THRESHOLD",
    "circuit_breaker_reset_ms": "OMNIROUTE_CIRCUIT_BREAKER_{}_RESET_MS",
    "degradation_threshold": "OMNIROUTE_PROVIDER_BREAKER_{}_DEGRADATION_THRESHOLD",
    "max_backoff_multiplier": "OMNIROUTE_PROVIDER_BREAKER_{}_MAX_BACKOFF_MULTIPLIER",
    "backoff_escalation_count": "OMNIROUTE_PROVIDER_BREAKER_{}_BACKOFF_ESCALATION_COUNT",
    "provider_failure_threshold": "OMNIROUTE_PROVIDER_BREAKER_{}_FAILURE_THRESHOLD",
    "provider_failure_window_ms": "OMNIROUTE_PROVIDER_BREAKER_{}_FAILURE_WINDOW_MS",
    "provider_cooldown_ms": "OMNIROUTE_PROVIDER_BREAKER_{}_COOLDOWN_MS",
}


# An empty failure window makes no sense (and cannot be stored): an override of 0 keeps the
# default. Other zeros are honoured (thresholds are clamped by the settings).
POSITIVE_FIELDS = frozenset({"provider_failure_window_ms"})


def profile_for_category(category: str) -> ProfileName:
    """The profile of a provider category (unknown categories use the API-key profile)."""
    return CATEGORY_PROFILES.get(category, ProfileName.APIKEY)


def _env_number(raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None


def profile_with_env(name: ProfileName, env: Mapping[str, str]) -> ProviderProfile:
    """The profile ``name`` with every valid environment override applied."""
    profile = PROFILES[name]
    changes: dict[str, int] = {}
    for field, pattern in ENV_OVERRIDES.items():
        value = _env_number(env.get(pattern.format(_ENV_TOKEN[name])))
        if value is not None and (value > 0 or field not in POSITIVE_FIELDS):
            changes[field] = value
    return replace(profile, **changes) if changes else profile
