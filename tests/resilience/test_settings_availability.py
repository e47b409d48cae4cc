"""The availability numbers of the settings document (spec decisions 14-16): defaults, bounds."""

from __future__ import annotations

from typing import Any

import pytest

from resilience.domain.profiles import ProfileName
from resilience.domain.settings import SettingsError, resolve_settings, to_document, validate_patch

NO_ENV: dict[str, str] = {}


def _errors(patch: Any) -> dict[str, str]:
    try:
        validate_patch(patch, to_document(resolve_settings({}, NO_ENV)))
    except SettingsError as error:
        return error.errors
    return {}


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        ({"availability": {"consecutiveFailures": 1}}, "availability.consecutiveFailures",
         "must be between 2 and 100"),
        ({"availability": {"transientCooldownCapMs": 999}}, "availability.transientCooldownCapMs",
         "must be between 1000 and 600000"),
        ({"attempts": {"retriesPerTarget": 6}}, "attempts.retriesPerTarget",
         "must be between 0 and 5"),
        ({"providerBreaker": {"apikey": {"minimumCalls": 1}}},
         "providerBreaker.apikey.minimumCalls", "must be between 2 and 1000"),
        ({"providerBreaker": {"apikey": {"failureRatePercent": 101}}},
         "providerBreaker.apikey.failureRatePercent", "must be between 1 and 100"),
        ({"providerBreaker": {"apikey": {"windowMs": 500}}}, "providerBreaker.apikey.windowMs",
         "must be between 1000 and 3600000"),
    ],
)  # fmt: skip
def test_the_availability_numbers_are_bounded(patch: Any, field: str, message: str) -> None:
    assert _errors(patch) == {field: message}


def test_the_availability_defaults() -> None:
    settings = resolve_settings({}, NO_ENV)
    availability = settings.availability
    assert (availability.consecutive_failures, availability.transient_cooldown_cap_ms) == (
        3, 30_000,
    )  # fmt: skip
    assert availability.panic_enabled
    attempts = settings.attempts
    assert (attempts.retries_per_target, attempts.backoff_base_ms) == (1, 250)
    assert (attempts.max_retry_after_wait_ms, attempts.deadline_ms) == (5_000, 300_000)
    breaker = settings.breaker_for(ProfileName.APIKEY)
    assert (breaker.window_ms, breaker.minimum_calls, breaker.failure_rate_percent) == (
        60_000, 10, 50,
    )  # fmt: skip
