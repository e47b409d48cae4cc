"""The settings schema: every field of the resilience settings document as a row (pure).

``SCHEMA`` maps each dotted path to its ``FieldSpec`` (kind, bounds, default, environment
variable); ``RULES`` are the cross-field constraints. ``resilience.domain.settings`` resolves,
validates and renders documents by walking them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from resilience.domain.attempt_policy import AttemptPolicy
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.combo_cooldown_wait import ComboCooldownWaitSettings
from resilience.domain.lockout import LockoutSettings
from resilience.domain.profiles import ProfileName, ProviderProfile, profile_with_env
from resilience.domain.quota_share_settings import QuotaShareSettings
from resilience.domain.request_queue import RequestQueueSettings
from resilience.domain.session_affinity_settings import (
    MAX_TTL_MS,
    TTL_HELP,
    SessionAffinitySettings,
)
from resilience.domain.settings_fields import (
    AtMostRule,
    BelowRule,
    Default,
    FieldSpec,
    Kind,
    Rule,
)
from resilience.domain.stream_recovery import StreamRecoverySettings

MS_PER_HOUR = 3_600_000
DEFAULT_BREAKER_WINDOW_MS = 60_000
DEFAULT_MINIMUM_CALLS = 10
DEFAULT_FAILURE_RATE = 50
MS_PER_DAY = 86_400_000
ROOT_FIELD = "non_field_errors"  # the error key of problems with the document as a whole


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
        # Decision 14: the breaker also opens on a failure rate within a window.
        f"{prefix}.windowMs": FieldSpec(Kind.INT, DEFAULT_BREAKER_WINDOW_MS, 1000, MS_PER_HOUR),
        f"{prefix}.minimumCalls": FieldSpec(Kind.INT, DEFAULT_MINIMUM_CALLS, 2, 1000),
        f"{prefix}.failureRatePercent": FieldSpec(Kind.INT, DEFAULT_FAILURE_RATE, 1, 100),
    }


MAX_BACKOFF_STEPS = 32
# profile → (baseCooldownMs, useUpstreamRetryHints, maxBackoffSteps) defaults (§4.2); the
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


DEFAULT_MODEL_LOCKOUT_SETTINGS = LockoutSettings()  # the reference's name for the §5.2 defaults
_LOCKOUT = DEFAULT_MODEL_LOCKOUT_SETTINGS
MODEL_LOCKOUT_FIELDS: dict[str, FieldSpec] = {
    "modelLockout.enabled": FieldSpec(Kind.BOOL, _LOCKOUT.enabled, loose=True),
    "modelLockout.errorCodes": FieldSpec(Kind.INT_LIST, _LOCKOUT.error_codes, 100, 599),
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
    # Decision 25: self-set timers start at the base and double per failed probe to the cap.
    "availability.transientCooldownBaseMs": FieldSpec(
        Kind.INT, _AVAILABILITY.transient_cooldown_base_ms, 100, 60_000
    ),
    "availability.transientCooldownCapMs": FieldSpec(
        Kind.INT, _AVAILABILITY.transient_cooldown_cap_ms, 1_000, 600_000
    ),
    "availability.panicEnabled": FieldSpec(Kind.BOOL, _AVAILABILITY.panic_enabled),
}
_ATTEMPTS = AttemptPolicy()
STREAM_TIMEOUT_MAX_MS = 600_000
READ_TIMEOUT_ENV = "OMNIROUTE_UPSTREAM_READ_TIMEOUT"  # seconds, the transport's read timeout


def _stream_idle_default(env: Mapping[str, str]) -> int:
    """The upstream read timeout in milliseconds when it is set (the silence a stream is
    allowed was that timeout before there was a setting), else 60 000."""
    try:
        seconds = float(env.get(READ_TIMEOUT_ENV, ""))
    except ValueError:
        return _ATTEMPTS.stream_idle_ms
    return round(seconds * 1000) if math.isfinite(seconds) else _ATTEMPTS.stream_idle_ms


ATTEMPT_FIELDS: dict[str, FieldSpec] = {
    "attempts.retriesPerTarget": FieldSpec(Kind.INT, _ATTEMPTS.retries_per_target, 0, 5),
    "attempts.backoffBaseMs": FieldSpec(Kind.INT, _ATTEMPTS.backoff_base_ms, 0, 10_000),
    "attempts.maxRetryAfterWaitMs": FieldSpec(
        Kind.INT, _ATTEMPTS.max_retry_after_wait_ms, 0, 60_000
    ),
    "attempts.deadlineMs": FieldSpec(Kind.INT, _ATTEMPTS.deadline_ms, 1_000, MS_PER_HOUR),
    "attempts.timeToFirstTokenMs": FieldSpec(
        Kind.INT, _ATTEMPTS.time_to_first_token_ms, 1_000, STREAM_TIMEOUT_MAX_MS
    ),
    "attempts.streamIdleMs": FieldSpec(
        Kind.INT, _stream_idle_default, 1_000, STREAM_TIMEOUT_MAX_MS
    ),
    # Decision 24: hedge a slow first token (0 ms: never; the learned time replaces it).
    "attempts.hedgeEnabled": FieldSpec(Kind.BOOL, _ATTEMPTS.hedge_enabled),
    "attempts.hedgeAfterMs": FieldSpec(
        Kind.INT, _ATTEMPTS.hedge_after_ms, 0, STREAM_TIMEOUT_MAX_MS
    ),
    "attempts.hedgeMaxPercent": FieldSpec(Kind.INT, _ATTEMPTS.hedge_max_percent, 0, 100),
}

_RECOVERY = StreamRecoverySettings()
_WATCHDOG = _RECOVERY.watchdog
# The reference's environment switches; they also take "yes" / "no" (env_yes).
STREAM_RECOVERY_FIELDS: dict[str, FieldSpec] = {
    "streamRecovery.enabled": FieldSpec(
        Kind.BOOL, _RECOVERY.enabled, env="STREAM_RECOVERY_ENABLED", env_yes=True
    ),
    # On by default (decision 22): the reference leaves a cut stream cut.
    "streamRecovery.continueMidStream": FieldSpec(
        Kind.BOOL,
        _RECOVERY.continue_mid_stream,
        env="STREAM_RECOVERY_MIDSTREAM_ENABLED",
        env_yes=True,
    ),
    "streamRecovery.throughputWatchdog.enabled": FieldSpec(
        Kind.BOOL, _WATCHDOG.enabled, env="STREAM_THROUGHPUT_WATCHDOG_ENABLED", env_yes=True
    ),
    "streamRecovery.throughputWatchdog.warmupMs": FieldSpec(
        Kind.INT, _WATCHDOG.warmup_ms, 0, 600_000, env="STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS"
    ),
    "streamRecovery.throughputWatchdog.windowMs": FieldSpec(
        Kind.INT, _WATCHDOG.window_ms, 1_000, 600_000, env="STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS"
    ),
    "streamRecovery.throughputWatchdog.minUsefulBytesPerSecond": FieldSpec(
        Kind.INT,
        _WATCHDOG.min_useful_bytes_per_second,
        1,
        1_000_000,
        env="STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND",
    ),
    "streamRecovery.throughputWatchdog.minUsefulBytes": FieldSpec(
        Kind.INT,
        _WATCHDOG.min_useful_bytes,
        1,
        1_000_000,
        env="STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES",
    ),
}

_QUEUE = RequestQueueSettings()
# The environment variables seed the defaults (a stored value wins), as everywhere here.
REQUEST_QUEUE_FIELDS: dict[str, FieldSpec] = {
    # Off by default (decision 21); the reference's switch also takes "yes" / "no".
    "requestQueue.autoEnableApiKeyProviders": FieldSpec(
        Kind.BOOL, _QUEUE.auto_enable_api_key_providers, env="RATE_LIMIT_AUTO_ENABLE", env_yes=True
    ),
    "requestQueue.requestsPerMinute": FieldSpec(Kind.INT, _QUEUE.requests_per_minute, 1, 1_000_000),
    "requestQueue.minTimeBetweenRequestsMs": FieldSpec(
        Kind.INT, _QUEUE.min_time_between_requests_ms, 0, MS_PER_HOUR
    ),
    "requestQueue.concurrentRequests": FieldSpec(Kind.INT, _QUEUE.concurrent_requests, 1, 10_000),
    "requestQueue.globalConcurrentRequests": FieldSpec(
        Kind.INT, _QUEUE.global_concurrent_requests, 0, 100_000
    ),
    # Decision 10: the execution budget (no separate executionMaxWaitMs), at most 30 s.
    "requestQueue.maxWaitMs": FieldSpec(
        Kind.INT, _QUEUE.max_wait_ms, 1, 30_000, env="RATE_LIMIT_MAX_WAIT_MS"
    ),
    "requestQueue.maxQueueDepth": FieldSpec(
        Kind.INT, _QUEUE.max_queue_depth, 0, 100_000, env="RATE_LIMIT_MAX_QUEUE_DEPTH"
    ),
}
QUOTA_SHARE_FIELDS: dict[str, FieldSpec] = {
    "quotaShareConcurrencyLimit.enabled": FieldSpec(Kind.BOOL, QuotaShareSettings().enabled),
}

_COMBO_WAIT = ComboCooldownWaitSettings()
COMBO_WAIT_MAX_MS = 300_000
# Decision 11. A zero maxWaitMs or maxAttempts turns the wait off (resolved, not refused), and
# budgetMs is at least maxWaitMs (RULES).
COMBO_COOLDOWN_WAIT_FIELDS: dict[str, FieldSpec] = {
    "comboCooldownWait.enabled": FieldSpec(Kind.BOOL, _COMBO_WAIT.enabled),
    "comboCooldownWait.maxWaitMs": FieldSpec(
        Kind.INT, _COMBO_WAIT.max_wait_ms, 0, COMBO_WAIT_MAX_MS
    ),
    "comboCooldownWait.maxAttempts": FieldSpec(Kind.INT, _COMBO_WAIT.max_attempts, 0, 10),
    "comboCooldownWait.budgetMs": FieldSpec(Kind.INT, _COMBO_WAIT.budget_ms, 0, COMBO_WAIT_MAX_MS),
}

# reference-part2 §1.3: off (0) by default, for every provider.
SESSION_AFFINITY_FIELDS: dict[str, FieldSpec] = {
    "sessionAffinity.ttlMs": FieldSpec(
        Kind.INT, SessionAffinitySettings().ttl_ms, 0, MAX_TTL_MS, help=TTL_HELP
    ),
}

SCHEMA: dict[str, FieldSpec] = {
    **{path: spec for name in ProfileName for path, spec in _breaker_fields(name).items()},
    "providerCooldown.enabled": FieldSpec(Kind.BOOL, False, env="PROVIDER_COOLDOWN_ENABLED"),
    "providerCooldown.minRetryCooldownMs": FieldSpec(
        Kind.INT, 5_000, 0, MS_PER_HOUR, env="PROVIDER_COOLDOWN_MIN_MS"
    ),
    "providerCooldown.maxRetryCooldownMs": FieldSpec(
        Kind.INT, 300_000, 0, MS_PER_DAY, env="PROVIDER_COOLDOWN_MAX_MS"
    ),
    **{path: spec for name in COOLDOWN_SECTIONS for path, spec in _cooldown_fields(name).items()},
    **MODEL_LOCKOUT_FIELDS,
    **AVAILABILITY_FIELDS,
    **ATTEMPT_FIELDS,
    **STREAM_RECOVERY_FIELDS,
    **REQUEST_QUEUE_FIELDS,
    **QUOTA_SHARE_FIELDS,
    **COMBO_COOLDOWN_WAIT_FIELDS,
    **SESSION_AFFINITY_FIELDS,
}
SECTIONS = tuple(dict.fromkeys(path.split(".")[0] for path in SCHEMA))
# Every proper prefix of a path: the objects a document may contain.
BRANCHES = frozenset(
    ".".join(parts[:end])
    for parts in (p.split(".") for p in SCHEMA)
    for end in range(1, len(parts))
)


RULES: tuple[Rule, ...] = (
    *(
        BelowRule(
            f"providerBreaker.{n}.degradationThreshold", f"providerBreaker.{n}.failureThreshold"
        )
        for n in ProfileName
    ),
    AtMostRule("providerCooldown.minRetryCooldownMs", "providerCooldown.maxRetryCooldownMs"),
    AtMostRule("modelLockout.baseCooldownMs", "modelLockout.maxCooldownMs"),
    AtMostRule("comboCooldownWait.maxWaitMs", "comboCooldownWait.budgetMs"),
    # A stored cap below the base lowers the base: no self-set timer outlasts the cap.
    AtMostRule(
        "availability.transientCooldownBaseMs",
        "availability.transientCooldownCapMs",
        lower_yields=True,
    ),
)
