"""Building and rendering some sections of the resilience settings (``settings``): the stream
recovery, request queue and combo cooldown-wait sections, from resolved values to their frozen
dataclasses and back to the document's camelCase shape (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resilience.domain.combo_cooldown_wait import ComboCooldownWaitSettings, effectively_enabled
from resilience.domain.request_queue import RequestQueueSettings
from resilience.domain.settings_fields import Value, number_of
from resilience.domain.stream_recovery import StreamRecoverySettings, WatchdogSettings


def combo_cooldown_wait(values: Mapping[str, Value]) -> ComboCooldownWaitSettings:
    max_wait_ms = number_of(values, "comboCooldownWait.maxWaitMs")
    max_attempts = number_of(values, "comboCooldownWait.maxAttempts")
    return ComboCooldownWaitSettings(
        enabled=effectively_enabled(
            bool(values["comboCooldownWait.enabled"]), max_wait_ms, max_attempts
        ),
        max_wait_ms=max_wait_ms,
        max_attempts=max_attempts,
        budget_ms=number_of(values, "comboCooldownWait.budgetMs"),  # RULES: ≥ maxWaitMs
    )


def request_queue(values: Mapping[str, Value]) -> RequestQueueSettings:
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
    return {
        "enabled": wait.enabled,
        "maxWaitMs": wait.max_wait_ms,
        "maxAttempts": wait.max_attempts,
        "budgetMs": wait.budget_ms,
    }


def request_queue_document(queue: RequestQueueSettings) -> dict[str, Any]:
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
