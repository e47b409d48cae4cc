"""Resilience's sections of the settings document, declared and registered (pure).

The sections (docs/configuration.md describes each one)::

    providerBreaker.{oauth,apikey,local}.{failureThreshold, degradationThreshold, resetTimeoutMs,
                                          windowMs, minimumCalls, failureRatePercent}
    providerCooldown.{enabled, minRetryCooldownMs, maxRetryCooldownMs}
    connectionCooldown.{oauth,apikey}.{baseCooldownMs, useUpstreamRetryHints, maxBackoffSteps,
                                       useUpstream429BreakerHints}
    modelLockout.{errorCodes, baseCooldownMs, maxCooldownMs, maxBackoffSteps,
                  useExponentialBackoff}
    availability.{consecutiveFailures, transientCooldownBaseMs, transientCooldownCapMs,
                  panicEnabled}

The sections that configure routing (attempts, stream recovery, the request queue, quota-share
concurrency, the combo cooldown wait, session affinity) are routing's own, declared in
``routing.domain.settings.sections``; the framework that resolves, validates and renders the
whole document is ``omniroute.core.settings``.

``connectionCooldown`` has no ``local`` section: local providers keep
the legacy mapping of their profile-table numbers (base = max(transient 2 000, rate-limit
cooldown 5 000) = 5 000 ms, upstream retry hints off because the rate-limit cooldown is not 0,
3 backoff steps, 429 breaker hints unset). ``useUpstream429BreakerHints`` is tri-state
(``Kind.OPTIONAL_BOOL``): true, false, or unset (``null``: the provider's default); ``null`` in
a patch clears a stored value, an omitted field keeps it.

``modelLockout`` resolves to the pure module's ``LockoutSettings``. ``errorCodes``
(``Kind.INT_LIST``: the statuses that count towards a pair's transient failures) keeps the stored
statuses within 100..599 but 404 and falls back to the default when none is left, while a patch
must be a non-empty list of such integers. Its ``maxCooldownMs`` also caps connection cooldowns.
Its former switch ``enabled`` is retired (``MODEL_LOCKOUT_RETIRED``): a patch may still set it,
for one release, and is told it was ignored; the document no longer shows it.

The rules: a breaker degrades before it opens (degradationThreshold < failureThreshold), the
cooldown's minimum is at most its maximum (for the provider cooldown and the model lockout
alike), and the availability's first self-set timer (``transientCooldownBaseMs``) is at most
its cap (a stored cap below it lowers the base).

``ResilienceSettings`` gathers the five typed sections for resilience's policy builders
(``resilience_settings_of``). Adding a section to resilience: its rows in ``schema``, its
words in ``words``, a typed object, a ``Section`` here and its place in ``RESILIENCE_SECTIONS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omniroute.core.settings import SETTINGS, ResolvedSettings, Section, Value, number_of, part_of
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.lockout import LockoutSettings
from resilience.domain.profiles import PROFILES, ProfileName, ProviderProfile
from resilience.domain.settings.schema import (
    AVAILABILITY_FIELDS,
    AVAILABILITY_RULES,
    BREAKER_FIELDS,
    BREAKER_RULES,
    CONNECTION_COOLDOWN_FIELDS,
    COOLDOWN_SECTIONS,
    DEFAULT_MODEL_LOCKOUT_SETTINGS,
    MODEL_LOCKOUT_FIELDS,
    MODEL_LOCKOUT_RETIRED,
    MODEL_LOCKOUT_RULES,
    PROVIDER_COOLDOWN_FIELDS,
    PROVIDER_COOLDOWN_RULES,
)
from resilience.domain.settings.words import FIELDS, GROUPS


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """The operator-editable numbers of one profile's provider breaker."""

    failure_threshold: int
    degradation_threshold: int
    reset_timeout_ms: int
    window_ms: int = 60_000
    minimum_calls: int = 10
    failure_rate_percent: int = 50


@dataclass(frozen=True, slots=True)
class ProviderCooldownSettings:
    """The optional provider cooldown tracker (window gate)."""

    enabled: bool
    min_retry_cooldown_ms: int
    max_retry_cooldown_ms: int


@dataclass(frozen=True, slots=True)
class CooldownSettings:
    """One profile's connection-cooldown numbers; times in milliseconds."""

    base_cooldown_ms: int
    use_upstream_retry_hints: bool
    max_backoff_steps: int
    use_upstream_429_breaker_hints: bool | None  # None: unset, the provider's default


def legacy_cooldown(profile: ProviderProfile) -> CooldownSettings:
    """The legacy mapping of a profile's numbers: base = max(transient, rate-limit
    cooldown), upstream retry hints only when the rate-limit cooldown is 0, steps = the
    profile's maximum backoff level. The ``local`` profile's connection cooldown."""
    return CooldownSettings(
        base_cooldown_ms=max(profile.transient_cooldown_ms, profile.rate_limit_cooldown_ms),
        use_upstream_retry_hints=profile.rate_limit_cooldown_ms == 0,
        max_backoff_steps=profile.max_backoff_level,
        use_upstream_429_breaker_hints=None,
    )


@dataclass(frozen=True, slots=True)
class ResilienceSettings:
    """Resilience's resolved sections: every field present, in range and consistent."""

    provider_breaker: Mapping[ProfileName, BreakerSettings]
    provider_cooldown: ProviderCooldownSettings
    connection_cooldown: Mapping[ProfileName, CooldownSettings]  # every profile, local included
    model_lockout: LockoutSettings
    availability: AvailabilitySettings = field(default_factory=AvailabilitySettings)

    def breaker_for(self, profile: ProfileName) -> BreakerSettings:
        """The breaker numbers of ``profile``."""
        return self.provider_breaker[profile]

    def cooldown_for(self, profile: ProfileName) -> CooldownSettings:
        """The connection-cooldown numbers of ``profile``."""
        return self.connection_cooldown[profile]


def _breaker(values: Mapping[str, Value], name: ProfileName) -> BreakerSettings:
    prefix = f"providerBreaker.{name}"
    return BreakerSettings(
        failure_threshold=number_of(values, f"{prefix}.failureThreshold"),
        degradation_threshold=number_of(values, f"{prefix}.degradationThreshold"),
        reset_timeout_ms=number_of(values, f"{prefix}.resetTimeoutMs"),
        window_ms=number_of(values, f"{prefix}.windowMs"),
        minimum_calls=number_of(values, f"{prefix}.minimumCalls"),
        failure_rate_percent=number_of(values, f"{prefix}.failureRatePercent"),
    )


def _cooldown(values: Mapping[str, Value], name: ProfileName) -> CooldownSettings:
    if name not in COOLDOWN_SECTIONS:
        return legacy_cooldown(PROFILES[name])  # no env override touches these three numbers
    prefix = f"connectionCooldown.{name}"
    hints_429 = values[f"{prefix}.useUpstream429BreakerHints"]
    return CooldownSettings(
        base_cooldown_ms=number_of(values, f"{prefix}.baseCooldownMs"),
        use_upstream_retry_hints=bool(values[f"{prefix}.useUpstreamRetryHints"]),
        max_backoff_steps=number_of(values, f"{prefix}.maxBackoffSteps"),
        use_upstream_429_breaker_hints=None if hints_429 is None else bool(hints_429),
    )


def _breakers(values: Mapping[str, Value]) -> Mapping[ProfileName, BreakerSettings]:
    return {name: _breaker(values, name) for name in ProfileName}


def _cooldowns(values: Mapping[str, Value]) -> Mapping[ProfileName, CooldownSettings]:
    return {name: _cooldown(values, name) for name in ProfileName}


def _provider_cooldown(values: Mapping[str, Value]) -> ProviderCooldownSettings:
    return ProviderCooldownSettings(
        enabled=bool(values["providerCooldown.enabled"]),
        min_retry_cooldown_ms=number_of(values, "providerCooldown.minRetryCooldownMs"),
        max_retry_cooldown_ms=number_of(values, "providerCooldown.maxRetryCooldownMs"),
    )


def _availability(values: Mapping[str, Value]) -> AvailabilitySettings:
    return AvailabilitySettings(
        consecutive_failures=number_of(values, "availability.consecutiveFailures"),
        transient_cooldown_cap_ms=number_of(values, "availability.transientCooldownCapMs"),
        panic_enabled=bool(values["availability.panicEnabled"]),
        transient_cooldown_base_ms=number_of(values, "availability.transientCooldownBaseMs"),
    )


def _model_lockout(values: Mapping[str, Value]) -> LockoutSettings:
    codes = values["modelLockout.errorCodes"]
    return LockoutSettings(
        error_codes=tuple(codes)
        if isinstance(codes, tuple | list)
        else DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes,
        base_cooldown_ms=number_of(values, "modelLockout.baseCooldownMs"),
        max_cooldown_ms=number_of(values, "modelLockout.maxCooldownMs"),
        max_backoff_steps=number_of(values, "modelLockout.maxBackoffSteps"),
        use_exponential_backoff=bool(values["modelLockout.useExponentialBackoff"]),
    )


def _breakers_document(breakers: Mapping[ProfileName, BreakerSettings]) -> dict[str, Any]:
    return {
        str(name): {
            "failureThreshold": breaker.failure_threshold,
            "degradationThreshold": breaker.degradation_threshold,
            "resetTimeoutMs": breaker.reset_timeout_ms,
            "windowMs": breaker.window_ms,
            "minimumCalls": breaker.minimum_calls,
            "failureRatePercent": breaker.failure_rate_percent,
        }
        for name, breaker in breakers.items()
    }


def _provider_cooldown_document(cooldown: ProviderCooldownSettings) -> dict[str, Any]:
    return {
        "enabled": cooldown.enabled,
        "minRetryCooldownMs": cooldown.min_retry_cooldown_ms,
        "maxRetryCooldownMs": cooldown.max_retry_cooldown_ms,
    }


def _cooldowns_document(cooldowns: Mapping[ProfileName, CooldownSettings]) -> dict[str, Any]:
    return {str(name): _cooldown_document(cooldowns[name]) for name in COOLDOWN_SECTIONS}


def _availability_document(availability: AvailabilitySettings) -> dict[str, Any]:
    return {
        "consecutiveFailures": availability.consecutive_failures,
        "transientCooldownBaseMs": availability.transient_cooldown_base_ms,
        "transientCooldownCapMs": availability.transient_cooldown_cap_ms,
        "panicEnabled": availability.panic_enabled,
    }


def _cooldown_document(cooldown: CooldownSettings) -> dict[str, Any]:
    return {
        "baseCooldownMs": cooldown.base_cooldown_ms,
        "useUpstreamRetryHints": cooldown.use_upstream_retry_hints,
        "maxBackoffSteps": cooldown.max_backoff_steps,
        "useUpstream429BreakerHints": cooldown.use_upstream_429_breaker_hints,
    }


def _lockout_document(lockout: LockoutSettings) -> dict[str, Any]:
    return {
        "errorCodes": list(lockout.error_codes),
        "baseCooldownMs": lockout.base_cooldown_ms,
        "maxCooldownMs": lockout.max_cooldown_ms,
        "maxBackoffSteps": lockout.max_backoff_steps,
        "useExponentialBackoff": lockout.use_exponential_backoff,
    }


def _section(name: str) -> dict[str, Any]:
    """A section's words: its part of this app's tables."""
    return {"headings": part_of(GROUPS, name), "words": part_of(FIELDS, name)}


PROVIDER_BREAKER: Section[Mapping[ProfileName, BreakerSettings]] = Section(
    "providerBreaker",
    BREAKER_FIELDS,
    _breakers,
    _breakers_document,
    BREAKER_RULES,
    **_section("providerBreaker"),
)
PROVIDER_COOLDOWN: Section[ProviderCooldownSettings] = Section(
    "providerCooldown",
    PROVIDER_COOLDOWN_FIELDS,
    _provider_cooldown,
    _provider_cooldown_document,
    PROVIDER_COOLDOWN_RULES,
    **_section("providerCooldown"),
)
CONNECTION_COOLDOWN: Section[Mapping[ProfileName, CooldownSettings]] = Section(
    "connectionCooldown",
    CONNECTION_COOLDOWN_FIELDS,
    _cooldowns,
    _cooldowns_document,
    **_section("connectionCooldown"),
)
MODEL_LOCKOUT: Section[LockoutSettings] = Section(
    "modelLockout",
    MODEL_LOCKOUT_FIELDS,
    _model_lockout,
    _lockout_document,
    MODEL_LOCKOUT_RULES,
    retired=MODEL_LOCKOUT_RETIRED,
    **_section("modelLockout"),
)
AVAILABILITY: Section[AvailabilitySettings] = Section(
    "availability",
    AVAILABILITY_FIELDS,
    _availability,
    _availability_document,
    AVAILABILITY_RULES,
    **_section("availability"),
)
RESILIENCE_SECTIONS = (
    PROVIDER_BREAKER,
    PROVIDER_COOLDOWN,
    CONNECTION_COOLDOWN,
    MODEL_LOCKOUT,
    AVAILABILITY,
)
SETTINGS.register(*RESILIENCE_SECTIONS)


def resilience_settings_of(resolved: ResolvedSettings) -> ResilienceSettings:
    """Resilience's typed sections of a resolved document."""
    return ResilienceSettings(
        provider_breaker=resolved[PROVIDER_BREAKER],
        provider_cooldown=resolved[PROVIDER_COOLDOWN],
        connection_cooldown=resolved[CONNECTION_COOLDOWN],
        model_lockout=resolved[MODEL_LOCKOUT],
        availability=resolved[AVAILABILITY],
    )
