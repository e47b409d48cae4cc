"""The fields of routing's settings sections, one row each (pure).

Each table maps a dotted path to its ``FieldSpec`` (kind, bounds, default, environment
variable); ``routing.domain.settings.sections`` declares the sections from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from omniroute.core.settings import MS_PER_HOUR, AtMostRule, FieldSpec, Kind, Rule
from resilience.domain.attempts.cooldown_wait import ComboCooldownWaitSettings
from resilience.domain.attempts.policy import AttemptPolicy
from resilience.domain.attempts.stream_recovery import StreamRecoverySettings
from resilience.domain.request_queue import RequestQueueSettings
from routing.domain.settings.quota_share import QuotaShareSettings
from routing.domain.settings.session_affinity import (
    MAX_TTL_MS,
    TTL_HELP,
    SessionAffinitySettings,
)

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
    # Hedge a slow first token (0 ms: never; the learned time replaces it).
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
    # On by default: the reference leaves a cut stream cut.
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
    # Off by default; the reference's switch also takes "yes" / "no".
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
    # The execution budget (no separate executionMaxWaitMs), at most 30 s.
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
# A zero maxWaitMs or maxAttempts turns the wait off (resolved, not refused), and
# budgetMs is at least maxWaitMs (COMBO_COOLDOWN_WAIT_RULES).
COMBO_COOLDOWN_WAIT_FIELDS: dict[str, FieldSpec] = {
    "comboCooldownWait.enabled": FieldSpec(Kind.BOOL, _COMBO_WAIT.enabled),
    "comboCooldownWait.maxWaitMs": FieldSpec(
        Kind.INT, _COMBO_WAIT.max_wait_ms, 0, COMBO_WAIT_MAX_MS
    ),
    "comboCooldownWait.maxAttempts": FieldSpec(Kind.INT, _COMBO_WAIT.max_attempts, 0, 10),
    "comboCooldownWait.budgetMs": FieldSpec(Kind.INT, _COMBO_WAIT.budget_ms, 0, COMBO_WAIT_MAX_MS),
}

# Session affinity: off (0) by default, for every provider.
SESSION_AFFINITY_FIELDS: dict[str, FieldSpec] = {
    "sessionAffinity.ttlMs": FieldSpec(
        Kind.INT, SessionAffinitySettings().ttl_ms, 0, MAX_TTL_MS, help=TTL_HELP
    ),
}
COMBO_COOLDOWN_WAIT_RULES: tuple[Rule, ...] = (
    AtMostRule("comboCooldownWait.maxWaitMs", "comboCooldownWait.budgetMs"),
)
