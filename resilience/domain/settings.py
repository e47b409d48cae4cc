"""Resilience settings: one JSON document the operator edits, read leniently, written strictly.

The document (reference-part2 §9; breaker numbers in reference-part1 §2.5, window gate in §3)::

    providerBreaker.{oauth,apikey,local}.{failureThreshold, degradationThreshold, resetTimeoutMs}
    providerCooldown.{enabled, minRetryCooldownMs, maxRetryCooldownMs}
    connectionCooldown.{oauth,apikey}.{baseCooldownMs, useUpstreamRetryHints, maxBackoffSteps,
                                       useUpstream429BreakerHints}
    modelLockout.{enabled, errorCodes, baseCooldownMs, maxCooldownMs, maxBackoffSteps,
                  useExponentialBackoff}
    availability.{consecutiveFailures, transientCooldownBaseMs, transientCooldownCapMs,
                  panicEnabled}
    attempts.{retriesPerTarget, backoffBaseMs, maxRetryAfterWaitMs, deadlineMs,
              timeToFirstTokenMs, streamIdleMs, hedgeEnabled, hedgeAfterMs, hedgeMaxPercent}
    streamRecovery.{enabled, continueMidStream}
    streamRecovery.throughputWatchdog.{enabled, warmupMs, windowMs, minUsefulBytesPerSecond,
                                       minUsefulBytes}
    requestQueue.{autoEnableApiKeyProviders, requestsPerMinute, minTimeBetweenRequestsMs,
                  concurrentRequests, globalConcurrentRequests, maxWaitMs, maxQueueDepth}
    quotaShareConcurrencyLimit.{enabled}
    comboCooldownWait.{enabled, maxWaitMs, maxAttempts, budgetMs}
    sessionAffinity.{ttlMs}

``connectionCooldown`` (reference-part1 §4.2) has no ``local`` section: local providers keep
the legacy mapping of their profile-table numbers (base = max(transient 2 000, rate-limit
cooldown 5 000) = 5 000 ms, upstream retry hints off because the rate-limit cooldown is not 0,
3 backoff steps, 429 breaker hints unset). ``useUpstream429BreakerHints`` is tri-state
(``Kind.OPTIONAL_BOOL``): true, false, or unset (``null``: the provider's default); ``null`` in
a patch clears a stored value, an omitted field keeps it.

``modelLockout`` (reference-part1 §5.2; off by default) resolves to the pure module's
``LockoutSettings``. Its ``enabled`` is read loosely from storage ("true", "1" and non-zero numbers
count as true) but patched strictly; ``errorCodes`` (``Kind.INT_LIST``) keeps the stored statuses
within 100..599 and falls back to the default when none is left, while a patch must be a
non-empty list of such integers. Its ``maxCooldownMs`` also caps connection cooldowns (§4.2).

``requestQueue`` (reference-part2 §5, decisions 10 and 21) resolves to ``RequestQueueSettings``:
``autoEnableApiKeyProviders`` is off by default (the reference's is on), and ``maxWaitMs``
(1..30 000) bounds execution from dispatch, not time spent queued; there is no
``executionMaxWaitMs``. ``quotaShareConcurrencyLimit`` (part2 §3.3) resolves to
``QuotaShareSettings``.

``comboCooldownWait`` (reference-part2 §4.2, decision 11) resolves to
``ComboCooldownWaitSettings``: on by default, ``maxWaitMs`` 90 000 (0..300 000), ``maxAttempts``
5 (0..10), ``budgetMs`` 300 000 (0..300 000, at least ``maxWaitMs``). Its ``enabled`` resolves
to false when ``maxWaitMs`` or ``maxAttempts`` is 0 (the document then shows false too);
``should_wait`` in the same module is the pure decision of one wait (§4.3, §4.4).

``sessionAffinity`` (reference-part2 §1.3, where it is a separate card, ``sessionAffinityTtlMs``)
resolves to ``SessionAffinitySettings``: ``ttlMs`` 0 (off) to 86 400 000, for every provider.

``SCHEMA`` is the table everything walks: dotted path → ``FieldSpec`` (kind, bounds, default,
environment variable). ``RULES`` add the cross-field constraints: a breaker degrades before it
opens (degradationThreshold < failureThreshold), and the cooldown's minimum is at most its
maximum (for the provider cooldown and the model lockout alike), as a combo's cooldown-wait
budget is at least its longest single wait and the availability's first self-set timer
(``transientCooldownBaseMs``) at most its cap (a stored cap below it lowers the base).

- ``resolve_settings`` reads a stored document leniently and never fails: the reference's
  "toInteger" rule (numbers and numeric strings are truncated and clamped, anything else keeps
  the default), booleans only when real booleans (``loose`` ones excepted), and the rules
  enforced by clamping.
- ``validate_patch`` (in ``settings_patch``) checks a partial document strictly (the API and
  the admin): unknown keys, wrong types, out-of-range values and broken rules are errors,
  never clamped.
- ``merge`` overlays a validated patch on the stored document; ``to_document`` renders resolved
  settings in the same camelCase shape.

Only what the operator set is stored, so defaults (and their environment overrides) still apply
to the rest. Adding a section: its rows in ``SCHEMA``, any rule in ``RULES``, a frozen dataclass,
and a line each in ``_build`` and ``to_document``. The row type (``FieldSpec``, ``Kind``) and
the rule types live in ``resilience.domain.settings_fields``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from resilience.domain.attempt_policy import AttemptPolicy
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.combo_cooldown_wait import ComboCooldownWaitSettings
from resilience.domain.lockout import LockoutSettings
from resilience.domain.profiles import PROFILES, ProfileName, ProviderProfile
from resilience.domain.quota_share_settings import QuotaShareSettings
from resilience.domain.request_queue import RequestQueueSettings
from resilience.domain.session_affinity_settings import SessionAffinitySettings

# Re-exported: the row type of ``SCHEMA`` and its kinds, for the API schema and the admin form.
from resilience.domain.settings_fields import FieldSpec as FieldSpec
from resilience.domain.settings_fields import Kind as Kind
from resilience.domain.settings_fields import (
    Value,
    number_of,
)
from resilience.domain.settings_patch import SettingsError as SettingsError
from resilience.domain.settings_patch import flatten as flatten
from resilience.domain.settings_patch import merge as merge
from resilience.domain.settings_patch import unflatten as unflatten
from resilience.domain.settings_patch import validate_patch as validate_patch
from resilience.domain.settings_schema import (
    COOLDOWN_SECTIONS as COOLDOWN_SECTIONS,
)
from resilience.domain.settings_schema import (
    DEFAULT_MODEL_LOCKOUT_SETTINGS as DEFAULT_MODEL_LOCKOUT_SETTINGS,
)
from resilience.domain.settings_schema import MAX_BACKOFF_STEPS as MAX_BACKOFF_STEPS
from resilience.domain.settings_schema import ROOT_FIELD as ROOT_FIELD
from resilience.domain.settings_schema import RULES as RULES
from resilience.domain.settings_schema import SCHEMA as SCHEMA
from resilience.domain.settings_schema import SECTIONS as SECTIONS
from resilience.domain.settings_sections import (
    combo_cooldown_wait,
    combo_cooldown_wait_document,
    request_queue,
    request_queue_document,
    stream_recovery,
    stream_recovery_document,
)
from resilience.domain.stream_recovery import StreamRecoverySettings


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
    """One profile's connection-cooldown numbers (§4.2); times in milliseconds."""

    base_cooldown_ms: int
    use_upstream_retry_hints: bool
    max_backoff_steps: int
    use_upstream_429_breaker_hints: bool | None  # None: unset, the provider's default


def legacy_cooldown(profile: ProviderProfile) -> CooldownSettings:
    """The legacy mapping of a profile's numbers (§4.2): base = max(transient, rate-limit
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
    """The resolved settings: every field present, in range and consistent."""

    provider_breaker: Mapping[ProfileName, BreakerSettings]
    provider_cooldown: ProviderCooldownSettings
    connection_cooldown: Mapping[ProfileName, CooldownSettings]  # every profile, local included
    model_lockout: LockoutSettings
    availability: AvailabilitySettings = field(default_factory=AvailabilitySettings)
    attempts: AttemptPolicy = field(default_factory=AttemptPolicy)
    stream_recovery: StreamRecoverySettings = field(default_factory=StreamRecoverySettings)
    request_queue: RequestQueueSettings = field(default_factory=RequestQueueSettings)
    quota_share: QuotaShareSettings = field(default_factory=QuotaShareSettings)
    combo_cooldown_wait: ComboCooldownWaitSettings = field(
        default_factory=ComboCooldownWaitSettings
    )
    session_affinity: SessionAffinitySettings = field(default_factory=SessionAffinitySettings)

    def breaker_for(self, profile: ProfileName) -> BreakerSettings:
        return self.provider_breaker[profile]

    def cooldown_for(self, profile: ProfileName) -> CooldownSettings:
        return self.connection_cooldown[profile]


def _lookup(document: Mapping[str, Any], path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def resolve_settings(stored: Mapping[str, Any], env: Mapping[str, str]) -> ResilienceSettings:
    """The settings of a stored document over the defaults (never fails; see module doc)."""
    values = {
        path: spec.coerce(_lookup(stored, path), spec.default_value(env))
        for path, spec in SCHEMA.items()
    }
    for rule in RULES:
        rule.fix(values)
    return _build(values)


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


def _build(values: Mapping[str, Value]) -> ResilienceSettings:
    return ResilienceSettings(
        provider_breaker={name: _breaker(values, name) for name in ProfileName},
        provider_cooldown=ProviderCooldownSettings(
            enabled=bool(values["providerCooldown.enabled"]),
            min_retry_cooldown_ms=number_of(values, "providerCooldown.minRetryCooldownMs"),
            max_retry_cooldown_ms=number_of(values, "providerCooldown.maxRetryCooldownMs"),
        ),
        connection_cooldown={name: _cooldown(values, name) for name in ProfileName},
        model_lockout=_model_lockout(values),
        availability=AvailabilitySettings(
            consecutive_failures=number_of(values, "availability.consecutiveFailures"),
            transient_cooldown_cap_ms=number_of(values, "availability.transientCooldownCapMs"),
            panic_enabled=bool(values["availability.panicEnabled"]),
            transient_cooldown_base_ms=number_of(values, "availability.transientCooldownBaseMs"),
        ),
        attempts=AttemptPolicy(
            retries_per_target=number_of(values, "attempts.retriesPerTarget"),
            backoff_base_ms=number_of(values, "attempts.backoffBaseMs"),
            max_retry_after_wait_ms=number_of(values, "attempts.maxRetryAfterWaitMs"),
            deadline_ms=number_of(values, "attempts.deadlineMs"),
            time_to_first_token_ms=number_of(values, "attempts.timeToFirstTokenMs"),
            stream_idle_ms=number_of(values, "attempts.streamIdleMs"),
            hedge_enabled=bool(values["attempts.hedgeEnabled"]),
            hedge_after_ms=number_of(values, "attempts.hedgeAfterMs"),
            hedge_max_percent=number_of(values, "attempts.hedgeMaxPercent"),
        ),
        stream_recovery=stream_recovery(values),
        request_queue=request_queue(values),
        quota_share=QuotaShareSettings(enabled=bool(values["quotaShareConcurrencyLimit.enabled"])),
        combo_cooldown_wait=combo_cooldown_wait(values),
        session_affinity=SessionAffinitySettings(ttl_ms=number_of(values, "sessionAffinity.ttlMs")),
    )


def _model_lockout(values: Mapping[str, Value]) -> LockoutSettings:
    codes = values["modelLockout.errorCodes"]
    return LockoutSettings(
        enabled=bool(values["modelLockout.enabled"]),
        error_codes=tuple(codes)
        if isinstance(codes, tuple | list)
        else DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes,
        base_cooldown_ms=number_of(values, "modelLockout.baseCooldownMs"),
        max_cooldown_ms=number_of(values, "modelLockout.maxCooldownMs"),
        max_backoff_steps=number_of(values, "modelLockout.maxBackoffSteps"),
        use_exponential_backoff=bool(values["modelLockout.useExponentialBackoff"]),
    )


def to_document(settings: ResilienceSettings) -> dict[str, Any]:
    """The full resolved document, camelCase as in the reference."""
    cooldown = settings.provider_cooldown
    return {
        "providerBreaker": {
            str(name): {
                "failureThreshold": breaker.failure_threshold,
                "degradationThreshold": breaker.degradation_threshold,
                "resetTimeoutMs": breaker.reset_timeout_ms,
                "windowMs": breaker.window_ms,
                "minimumCalls": breaker.minimum_calls,
                "failureRatePercent": breaker.failure_rate_percent,
            }
            for name, breaker in settings.provider_breaker.items()
        },
        "providerCooldown": {
            "enabled": cooldown.enabled,
            "minRetryCooldownMs": cooldown.min_retry_cooldown_ms,
            "maxRetryCooldownMs": cooldown.max_retry_cooldown_ms,
        },
        "connectionCooldown": {
            str(name): _cooldown_document(settings.cooldown_for(name)) for name in COOLDOWN_SECTIONS
        },
        "modelLockout": _lockout_document(settings.model_lockout),
        "availability": {
            "consecutiveFailures": settings.availability.consecutive_failures,
            "transientCooldownBaseMs": settings.availability.transient_cooldown_base_ms,
            "transientCooldownCapMs": settings.availability.transient_cooldown_cap_ms,
            "panicEnabled": settings.availability.panic_enabled,
        },
        "attempts": {
            "retriesPerTarget": settings.attempts.retries_per_target,
            "backoffBaseMs": settings.attempts.backoff_base_ms,
            "maxRetryAfterWaitMs": settings.attempts.max_retry_after_wait_ms,
            "deadlineMs": settings.attempts.deadline_ms,
            "timeToFirstTokenMs": settings.attempts.time_to_first_token_ms,
            "streamIdleMs": settings.attempts.stream_idle_ms,
            "hedgeEnabled": settings.attempts.hedge_enabled,
            "hedgeAfterMs": settings.attempts.hedge_after_ms,
            "hedgeMaxPercent": settings.attempts.hedge_max_percent,
        },
        "streamRecovery": stream_recovery_document(settings.stream_recovery),
        "requestQueue": request_queue_document(settings.request_queue),
        "quotaShareConcurrencyLimit": {"enabled": settings.quota_share.enabled},
        "comboCooldownWait": combo_cooldown_wait_document(settings.combo_cooldown_wait),
        "sessionAffinity": {"ttlMs": settings.session_affinity.ttl_ms},
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
        "enabled": lockout.enabled,
        "errorCodes": list(lockout.error_codes),
        "baseCooldownMs": lockout.base_cooldown_ms,
        "maxCooldownMs": lockout.max_cooldown_ms,
        "maxBackoffSteps": lockout.max_backoff_steps,
        "useExponentialBackoff": lockout.use_exponential_backoff,
    }
