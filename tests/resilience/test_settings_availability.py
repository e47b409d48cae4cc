"""The availability numbers of the settings document: defaults, bounds."""

from __future__ import annotations

from typing import Any

import pytest

from omniroute.core.settings import SETTINGS, SettingsError
from resilience.domain.profiles import ProfileName
from resilience.domain.settings.document import AVAILABILITY, PROVIDER_BREAKER
from routing.domain.settings.sections import ATTEMPTS

NO_ENV: dict[str, str] = {}


def _errors(patch: Any) -> dict[str, str]:
    try:
        SETTINGS.validate_patch(patch, SETTINGS.render(SETTINGS.resolve({}, NO_ENV)))
    except SettingsError as error:
        return error.errors
    return {}


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        (
            {"availability": {"consecutiveFailures": 1}},
            "availability.consecutiveFailures",
            "must be between 2 and 100",
        ),
        (
            {"availability": {"transientCooldownCapMs": 999}},
            "availability.transientCooldownCapMs",
            "must be between 1000 and 600000",
        ),
        (
            {"attempts": {"retriesPerTarget": 6}},
            "attempts.retriesPerTarget",
            "must be between 0 and 5",
        ),
        (
            {"attempts": {"timeToFirstTokenMs": 999}},
            "attempts.timeToFirstTokenMs",
            "must be between 1000 and 600000",
        ),
        (
            {"attempts": {"streamIdleMs": 600_001}},
            "attempts.streamIdleMs",
            "must be between 1000 and 600000",
        ),
        ({"attempts": {"streamIdleMs": "60000"}}, "attempts.streamIdleMs", "must be an integer"),
        (
            {"providerBreaker": {"apikey": {"minimumCalls": 1}}},
            "providerBreaker.apikey.minimumCalls",
            "must be between 2 and 1000",
        ),
        (
            {"providerBreaker": {"apikey": {"failureRatePercent": 101}}},
            "providerBreaker.apikey.failureRatePercent",
            "must be between 1 and 100",
        ),
        (
            {"providerBreaker": {"apikey": {"windowMs": 500}}},
            "providerBreaker.apikey.windowMs",
            "must be between 1000 and 3600000",
        ),
    ],
)
def test_the_availability_numbers_are_bounded(patch: Any, field: str, message: str) -> None:
    assert _errors(patch) == {field: message}


def test_the_availability_defaults() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)
    availability = settings[AVAILABILITY]
    assert (availability.consecutive_failures, availability.transient_cooldown_cap_ms) == (
        3,
        30_000,
    )
    assert availability.panic_enabled
    attempts = settings[ATTEMPTS]
    assert (attempts.retries_per_target, attempts.backoff_base_ms) == (1, 250)
    assert (attempts.max_retry_after_wait_ms, attempts.deadline_ms) == (5_000, 300_000)
    assert (attempts.time_to_first_token_ms, attempts.stream_idle_ms) == (60_000, 60_000)
    breaker = settings[PROVIDER_BREAKER][ProfileName.APIKEY]
    assert (breaker.window_ms, breaker.minimum_calls, breaker.failure_rate_percent) == (
        60_000,
        10,
        50,
    )


@pytest.mark.parametrize(
    ("seconds", "idle_ms"),
    [
        ("45", 45_000),
        ("2.5", 2_500),
        ("0.2", 1_000),  # clamped into 1 000..600 000
        ("3600", 600_000),
        ("soon", 60_000),  # not a number: the plain default
        ("nan", 60_000),
    ],
)
def test_the_upstream_read_timeout_seeds_stream_idle(seconds: str, idle_ms: int) -> None:
    settings = SETTINGS.resolve({}, {"OMNIROUTE_UPSTREAM_READ_TIMEOUT": seconds})
    assert settings[ATTEMPTS].stream_idle_ms == idle_ms
    assert settings[ATTEMPTS].time_to_first_token_ms == 60_000  # not tied to the read timeout


def test_a_stored_stream_idle_wins_over_the_read_timeout() -> None:
    stored = {"attempts": {"streamIdleMs": 5_000, "timeToFirstTokenMs": 7_000}}
    env = {"OMNIROUTE_UPSTREAM_READ_TIMEOUT": "45"}
    attempts = SETTINGS.resolve(stored, env)[ATTEMPTS]
    assert (attempts.stream_idle_ms, attempts.time_to_first_token_ms) == (5_000, 7_000)
    assert SETTINGS.render(SETTINGS.resolve(stored, env))["attempts"]["streamIdleMs"] == 5_000
