"""The fields of resilience's settings sections, one row each (pure).

Each table maps a dotted path to its ``FieldSpec`` (kind, bounds, default, environment
variable); the ``*_RULES`` are the sections' cross-field constraints.
``resilience.domain.settings.document`` declares the sections from them.
"""

from __future__ import annotations

from collections.abc import Callable

from omniroute.core.settings import (
    MS_PER_DAY,
    MS_PER_HOUR,
    AtMostRule,
    BelowRule,
    Default,
    FieldSpec,
    Kind,
    Rule,
)
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.lockout import NEVER_COUNTED_STATUSES, LockoutSettings
from resilience.domain.profiles import ProfileName, ProviderProfile, profile_with_env

DEFAULT_BREAKER_WINDOW_MS = 60_000
DEFAULT_MINIMUM_CALLS = 10
DEFAULT_FAILURE_RATE = 50


def _from_profile(name: ProfileName, pick: Callable[[ProviderProfile], int]) -> Default:
    return lambda env: pick(profile_with_env(name, env))


def _breaker_fields(name: ProfileName) -> dict[str, FieldSpec]:
    # Defaults and their OMNIROUTE_* overrides come from the profile table (profiles.py).
    prefix = f"providerBreaker.{name}"
    return {
        f"{prefix}.failureThreshold": FieldSpec(
            Kind.INT, _from_profile(name, lambda p: p.circuit_breaker_threshold), 2, 1000
        ),
        f"{prefix}.degradationThreshold": FieldSpec(
            Kind.INT, _from_profile(name, lambda p: p.effective_degradation_threshold), 1, 1000
        ),
        f"{prefix}.resetTimeoutMs": FieldSpec(
            Kind.INT, _from_profile(name, lambda p: p.circuit_breaker_reset_ms), 1000, MS_PER_DAY
        ),
        # The breaker also opens on a failure rate within a window.
        f"{prefix}.windowMs": FieldSpec(Kind.INT, DEFAULT_BREAKER_WINDOW_MS, 1000, MS_PER_HOUR),
        f"{prefix}.minimumCalls": FieldSpec(Kind.INT, DEFAULT_MINIMUM_CALLS, 2, 1000),
        f"{prefix}.failureRatePercent": FieldSpec(Kind.INT, DEFAULT_FAILURE_RATE, 1, 100),
    }


MAX_BACKOFF_STEPS = 32
# profile → (baseCooldownMs, useUpstreamRetryHints, maxBackoffSteps) defaults; the
# profiles with an operator section (local has none: see the module doc).
_COOLDOWN_DEFAULTS = {ProfileName.OAUTH: (5_000, False, 8), ProfileName.APIKEY: (3_000, True, 5)}
COOLDOWN_SECTIONS = tuple(_COOLDOWN_DEFAULTS)


def _cooldown_fields(name: ProfileName) -> dict[str, FieldSpec]:
    base, hints, steps = _COOLDOWN_DEFAULTS[name]
    prefix = f"connectionCooldown.{name}"
    return {
        f"{prefix}.baseCooldownMs": FieldSpec(Kind.INT, base, 0, MS_PER_DAY),
        f"{prefix}.useUpstreamRetryHints": FieldSpec(Kind.BOOL, hints),
        f"{prefix}.maxBackoffSteps": FieldSpec(Kind.INT, steps, 0, MAX_BACKOFF_STEPS),
        f"{prefix}.useUpstream429BreakerHints": FieldSpec(Kind.OPTIONAL_BOOL, None),
    }


DEFAULT_MODEL_LOCKOUT_SETTINGS = LockoutSettings()  # the reference's name for these defaults
_LOCKOUT = DEFAULT_MODEL_LOCKOUT_SETTINGS
MODEL_LOCKOUT_FIELDS: dict[str, FieldSpec] = {
    "modelLockout.errorCodes": FieldSpec(
        Kind.INT_LIST, _LOCKOUT.error_codes, 100, 599, excluded=NEVER_COUNTED_STATUSES
    ),
    "modelLockout.baseCooldownMs": FieldSpec(Kind.INT, _LOCKOUT.base_cooldown_ms, 5_000, 600_000),
    "modelLockout.maxCooldownMs": FieldSpec(Kind.INT, _LOCKOUT.max_cooldown_ms, 5_000, MS_PER_HOUR),
    "modelLockout.maxBackoffSteps": FieldSpec(Kind.INT, _LOCKOUT.max_backoff_steps, 0, 20),
    "modelLockout.useExponentialBackoff": FieldSpec(Kind.BOOL, _LOCKOUT.use_exponential_backoff),
}

_AVAILABILITY = AvailabilitySettings()
AVAILABILITY_FIELDS: dict[str, FieldSpec] = {
    "availability.consecutiveFailures": FieldSpec(
        Kind.INT, _AVAILABILITY.consecutive_failures, 2, 100
    ),
    # Self-set timers start at the base and double per failed probe to the cap.
    "availability.transientCooldownBaseMs": FieldSpec(
        Kind.INT, _AVAILABILITY.transient_cooldown_base_ms, 100, 60_000
    ),
    "availability.transientCooldownCapMs": FieldSpec(
        Kind.INT, _AVAILABILITY.transient_cooldown_cap_ms, 1_000, 600_000
    ),
    "availability.panicEnabled": FieldSpec(Kind.BOOL, _AVAILABILITY.panic_enabled),
}
BREAKER_FIELDS: dict[str, FieldSpec] = {
    path: spec for name in ProfileName for path, spec in _breaker_fields(name).items()
}
# A breaker degrades before it opens.
BREAKER_RULES: tuple[Rule, ...] = tuple(
    BelowRule(f"providerBreaker.{n}.degradationThreshold", f"providerBreaker.{n}.failureThreshold")
    for n in ProfileName
)

PROVIDER_COOLDOWN_FIELDS: dict[str, FieldSpec] = {
    "providerCooldown.enabled": FieldSpec(Kind.BOOL, False, env="PROVIDER_COOLDOWN_ENABLED"),
    "providerCooldown.minRetryCooldownMs": FieldSpec(
        Kind.INT, 5_000, 0, MS_PER_HOUR, env="PROVIDER_COOLDOWN_MIN_MS"
    ),
    "providerCooldown.maxRetryCooldownMs": FieldSpec(
        Kind.INT, 300_000, 0, MS_PER_DAY, env="PROVIDER_COOLDOWN_MAX_MS"
    ),
}
PROVIDER_COOLDOWN_RULES: tuple[Rule, ...] = (
    AtMostRule("providerCooldown.minRetryCooldownMs", "providerCooldown.maxRetryCooldownMs"),
)

CONNECTION_COOLDOWN_FIELDS: dict[str, FieldSpec] = {
    path: spec for name in COOLDOWN_SECTIONS for path, spec in _cooldown_fields(name).items()
}

# Accepted in a patch for one release and ignored, with this warning.
MODEL_LOCKOUT_RETIRED = {
    "modelLockout.enabled": (
        "retired: ignored. The model lockout always applies; modelLockout.errorCodes lists the "
        "statuses that count towards a pair's transient failures."
    ),
}
MODEL_LOCKOUT_RULES: tuple[Rule, ...] = (
    AtMostRule("modelLockout.baseCooldownMs", "modelLockout.maxCooldownMs"),
)
# A stored cap below the base lowers the base: no self-set timer outlasts the cap.
AVAILABILITY_RULES: tuple[Rule, ...] = (
    AtMostRule(
        "availability.transientCooldownBaseMs",
        "availability.transientCooldownCapMs",
        lower_yields=True,
    ),
)
