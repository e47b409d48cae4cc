"""Routing's sections of the settings document, declared and registered (pure).

The sections (docs/configuration.md describes each one)::

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

``attempts`` resolves to ``AttemptPolicy`` (a combo may override any of its keys:
``routing.domain.settings.overrides``). ``requestQueue`` resolves to ``RequestQueueSettings``:
``autoEnableApiKeyProviders`` is off by default (the reference's is on), and ``maxWaitMs``
(1..30 000) bounds execution from dispatch, not time spent queued; there is no
``executionMaxWaitMs``. ``quotaShareConcurrencyLimit`` resolves to ``QuotaShareSettings``.

``comboCooldownWait`` resolves to ``ComboCooldownWaitSettings``: on by default, ``maxWaitMs``
90 000 (0..300 000), ``maxAttempts`` 5 (0..10), ``budgetMs`` 300 000 (0..300 000, at least
``maxWaitMs``). Its ``enabled`` resolves to false when ``maxWaitMs`` or ``maxAttempts`` is 0
(the document then shows false too).

``sessionAffinity`` (the reference's separate ``sessionAffinityTtlMs`` card) resolves to
``SessionAffinitySettings``: ``ttlMs`` 0 (off) to 86 400 000, for every provider.

The sections are registered when this module is imported (``routing/apps.py`` imports it), after
resilience's. Adding a section to routing: its rows in ``fields``, its words in ``words``, a
typed object, a ``Section`` here and its place in ``ROUTING_SECTIONS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute.core.settings import SETTINGS, Section, Value, number_of, part_of
from resilience.domain.attempts.cooldown_wait import ComboCooldownWaitSettings, effectively_enabled
from resilience.domain.attempts.policy import AttemptPolicy
from resilience.domain.attempts.stream_recovery import StreamRecoverySettings, WatchdogSettings
from resilience.domain.request_queue import RequestQueueSettings
from routing.domain.settings.fields import (
    ATTEMPT_FIELDS,
    COMBO_COOLDOWN_WAIT_FIELDS,
    COMBO_COOLDOWN_WAIT_RULES,
    QUOTA_SHARE_FIELDS,
    REQUEST_QUEUE_FIELDS,
    SESSION_AFFINITY_FIELDS,
    STREAM_RECOVERY_FIELDS,
)
from routing.domain.settings.quota_share import QuotaShareSettings
from routing.domain.settings.session_affinity import SessionAffinitySettings
from routing.domain.settings.words import FIELDS, GROUPS


def attempts(values: Mapping[str, Value]) -> AttemptPolicy:
    """The ``attempts`` section's policy."""
    return AttemptPolicy(
        retries_per_target=number_of(values, "attempts.retriesPerTarget"),
        backoff_base_ms=number_of(values, "attempts.backoffBaseMs"),
        max_retry_after_wait_ms=number_of(values, "attempts.maxRetryAfterWaitMs"),
        deadline_ms=number_of(values, "attempts.deadlineMs"),
        time_to_first_token_ms=number_of(values, "attempts.timeToFirstTokenMs"),
        stream_idle_ms=number_of(values, "attempts.streamIdleMs"),
        hedge_enabled=bool(values["attempts.hedgeEnabled"]),
        hedge_after_ms=number_of(values, "attempts.hedgeAfterMs"),
        hedge_max_percent=number_of(values, "attempts.hedgeMaxPercent"),
    )


def quota_share(values: Mapping[str, Value]) -> QuotaShareSettings:
    """The ``quotaShareConcurrencyLimit`` section's settings."""
    return QuotaShareSettings(enabled=bool(values["quotaShareConcurrencyLimit.enabled"]))


def session_affinity(values: Mapping[str, Value]) -> SessionAffinitySettings:
    """The ``sessionAffinity`` section's settings."""
    return SessionAffinitySettings(ttl_ms=number_of(values, "sessionAffinity.ttlMs"))


def attempts_document(policy: AttemptPolicy) -> dict[str, Any]:
    """The ``attempts`` section of the document."""
    return {
        "retriesPerTarget": policy.retries_per_target,
        "backoffBaseMs": policy.backoff_base_ms,
        "maxRetryAfterWaitMs": policy.max_retry_after_wait_ms,
        "deadlineMs": policy.deadline_ms,
        "timeToFirstTokenMs": policy.time_to_first_token_ms,
        "streamIdleMs": policy.stream_idle_ms,
        "hedgeEnabled": policy.hedge_enabled,
        "hedgeAfterMs": policy.hedge_after_ms,
        "hedgeMaxPercent": policy.hedge_max_percent,
    }


def quota_share_document(share: QuotaShareSettings) -> dict[str, Any]:
    """The ``quotaShareConcurrencyLimit`` section of the document."""
    return {"enabled": share.enabled}


def session_affinity_document(affinity: SessionAffinitySettings) -> dict[str, Any]:
    """The ``sessionAffinity`` section of the document."""
    return {"ttlMs": affinity.ttl_ms}


def combo_cooldown_wait(values: Mapping[str, Value]) -> ComboCooldownWaitSettings:
    """The ``comboCooldownWait`` section's settings."""
    max_wait_ms = number_of(values, "comboCooldownWait.maxWaitMs")
    max_attempts = number_of(values, "comboCooldownWait.maxAttempts")
    return ComboCooldownWaitSettings(
        enabled=effectively_enabled(
            bool(values["comboCooldownWait.enabled"]), max_wait_ms, max_attempts
        ),
        max_wait_ms=max_wait_ms,
        max_attempts=max_attempts,
        budget_ms=number_of(values, "comboCooldownWait.budgetMs"),  # the rule: ≥ maxWaitMs
    )


def request_queue(values: Mapping[str, Value]) -> RequestQueueSettings:
    """The ``requestQueue`` section's settings."""
    return RequestQueueSettings(
        auto_enable_api_key_providers=bool(values["requestQueue.autoEnableApiKeyProviders"]),
        requests_per_minute=number_of(values, "requestQueue.requestsPerMinute"),
        min_time_between_requests_ms=number_of(values, "requestQueue.minTimeBetweenRequestsMs"),
        concurrent_requests=number_of(values, "requestQueue.concurrentRequests"),
        global_concurrent_requests=number_of(values, "requestQueue.globalConcurrentRequests"),
        max_wait_ms=number_of(values, "requestQueue.maxWaitMs"),
        max_queue_depth=number_of(values, "requestQueue.maxQueueDepth"),
    )


def stream_recovery(values: Mapping[str, Value]) -> StreamRecoverySettings:
    """The ``streamRecovery`` section's settings."""
    watchdog = "streamRecovery.throughputWatchdog"
    return StreamRecoverySettings(
        enabled=bool(values["streamRecovery.enabled"]),
        continue_mid_stream=bool(values["streamRecovery.continueMidStream"]),
        watchdog=WatchdogSettings(
            enabled=bool(values[f"{watchdog}.enabled"]),
            warmup_ms=number_of(values, f"{watchdog}.warmupMs"),
            window_ms=number_of(values, f"{watchdog}.windowMs"),
            min_useful_bytes_per_second=number_of(values, f"{watchdog}.minUsefulBytesPerSecond"),
            min_useful_bytes=number_of(values, f"{watchdog}.minUsefulBytes"),
        ),
    )


def combo_cooldown_wait_document(wait: ComboCooldownWaitSettings) -> dict[str, Any]:
    """The ``comboCooldownWait`` section of the document."""
    return {
        "enabled": wait.enabled,
        "maxWaitMs": wait.max_wait_ms,
        "maxAttempts": wait.max_attempts,
        "budgetMs": wait.budget_ms,
    }


def request_queue_document(queue: RequestQueueSettings) -> dict[str, Any]:
    """The ``requestQueue`` section of the document."""
    return {
        "autoEnableApiKeyProviders": queue.auto_enable_api_key_providers,
        "requestsPerMinute": queue.requests_per_minute,
        "minTimeBetweenRequestsMs": queue.min_time_between_requests_ms,
        "concurrentRequests": queue.concurrent_requests,
        "globalConcurrentRequests": queue.global_concurrent_requests,
        "maxWaitMs": queue.max_wait_ms,
        "maxQueueDepth": queue.max_queue_depth,
    }


def stream_recovery_document(recovery: StreamRecoverySettings) -> dict[str, Any]:
    """The ``streamRecovery`` section of the document."""
    watchdog = recovery.watchdog
    return {
        "enabled": recovery.enabled,
        "continueMidStream": recovery.continue_mid_stream,
        "throughputWatchdog": {
            "enabled": watchdog.enabled,
            "warmupMs": watchdog.warmup_ms,
            "windowMs": watchdog.window_ms,
            "minUsefulBytesPerSecond": watchdog.min_useful_bytes_per_second,
            "minUsefulBytes": watchdog.min_useful_bytes,
        },
    }


def _words(name: str) -> dict[str, Any]:
    """A section's words: its part of this app's tables."""
    return {"headings": part_of(GROUPS, name), "words": part_of(FIELDS, name)}


ATTEMPTS: Section[AttemptPolicy] = Section(
    "attempts", ATTEMPT_FIELDS, attempts, attempts_document, **_words("attempts")
)
STREAM_RECOVERY: Section[StreamRecoverySettings] = Section(
    "streamRecovery",
    STREAM_RECOVERY_FIELDS,
    stream_recovery,
    stream_recovery_document,
    **_words("streamRecovery"),
)
REQUEST_QUEUE: Section[RequestQueueSettings] = Section(
    "requestQueue",
    REQUEST_QUEUE_FIELDS,
    request_queue,
    request_queue_document,
    **_words("requestQueue"),
)
QUOTA_SHARE: Section[QuotaShareSettings] = Section(
    "quotaShareConcurrencyLimit",
    QUOTA_SHARE_FIELDS,
    quota_share,
    quota_share_document,
    **_words("quotaShareConcurrencyLimit"),
)
COMBO_COOLDOWN_WAIT: Section[ComboCooldownWaitSettings] = Section(
    "comboCooldownWait",
    COMBO_COOLDOWN_WAIT_FIELDS,
    combo_cooldown_wait,
    combo_cooldown_wait_document,
    COMBO_COOLDOWN_WAIT_RULES,
    **_words("comboCooldownWait"),
)
SESSION_AFFINITY: Section[SessionAffinitySettings] = Section(
    "sessionAffinity",
    SESSION_AFFINITY_FIELDS,
    session_affinity,
    session_affinity_document,
    **_words("sessionAffinity"),
)
ROUTING_SECTIONS = (
    ATTEMPTS,
    STREAM_RECOVERY,
    REQUEST_QUEUE,
    QUOTA_SHARE,
    COMBO_COOLDOWN_WAIT,
    SESSION_AFFINITY,
)
SETTINGS.register(*ROUTING_SECTIONS)
