"""The ``comboCooldownWait`` section of the settings document (docs/configuration.md):
defaults, lenient resolve, strict patches through the API, and the pure wait
decision."""

from __future__ import annotations

import math
from typing import Any

import pytest
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, SettingsError
from resilience.domain.attempts.cooldown_wait import (
    ALLOWED_REASONS,
    DENIED_REASONS,
    ComboCooldownWaitSettings,
    should_wait,
)
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from routing.domain.settings.sections import COMBO_COOLDOWN_WAIT

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
SECTION = "comboCooldownWait"
DEFAULT_DOCUMENT = {"enabled": True, "maxWaitMs": 90_000, "maxAttempts": 5, "budgetMs": 300_000}


def _wait(stored: Any = None) -> ComboCooldownWaitSettings:
    return SETTINGS.resolve({SECTION: {} if stored is None else stored}, NO_ENV)[
        COMBO_COOLDOWN_WAIT
    ]


def _document(stored: Any) -> dict[str, Any]:
    return dict(SETTINGS.render(SETTINGS.resolve({SECTION: stored}, NO_ENV))[SECTION])


def _errors(patch: Any, current: dict[str, Any] | None = None) -> dict[str, str]:
    try:
        SETTINGS.validate_patch(patch, SETTINGS.render(SETTINGS.resolve(current or {}, NO_ENV)))
    except SettingsError as error:
        return error.errors
    return {}


# --- defaults and helpers ----------------------------------------------------------------------


def test_the_defaults() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)

    assert settings[COMBO_COOLDOWN_WAIT] == ComboCooldownWaitSettings(
        enabled=True, max_wait_ms=90_000, max_attempts=5, budget_ms=300_000
    )
    assert (
        settings[COMBO_COOLDOWN_WAIT] == ComboCooldownWaitSettings()
    )  # agrees with the section's fields
    assert SETTINGS.render(settings)[SECTION] == DEFAULT_DOCUMENT


def test_a_document_without_the_section_gets_its_defaults() -> None:
    resolved = SETTINGS.resolve({"modelLockout": {"maxBackoffSteps": 3}}, NO_ENV)
    assert resolved[COMBO_COOLDOWN_WAIT] == ComboCooldownWaitSettings()


def test_the_helpers() -> None:
    wait = ComboCooldownWaitSettings(max_wait_ms=2_500, budget_ms=12_750)
    assert (wait.max_wait_seconds, wait.budget_seconds) == (2.5, 12.75)


def test_the_environment_moves_nothing() -> None:
    env = {"COMBO_COOLDOWN_WAIT_ENABLED": "false", "COMBO_COOLDOWN_WAIT_MAX_WAIT_MS": "5"}
    assert SETTINGS.resolve({}, env)[COMBO_COOLDOWN_WAIT] == ComboCooldownWaitSettings()


# --- lenient resolve of a stored document ------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "stored", "expected"),
    [
        ("maxWaitMs", -1, 0),
        ("maxWaitMs", 600_000, 300_000),
        ("maxAttempts", -3, 0),
        ("maxAttempts", 11, 10),
        ("budgetMs", 400_000, 300_000),
        ("maxAttempts", "7", 7),  # numeric strings and floats: truncated ("toInteger")
        ("maxWaitMs", 12_000.9, 12_000),
    ],
)
def test_stored_numbers_are_clamped(key: str, stored: Any, expected: int) -> None:
    assert _document({key: stored})[key] == expected


@pytest.mark.parametrize("garbage", ["soon", None, [], {}, True, "1_000"])
@pytest.mark.parametrize("key", ["maxWaitMs", "maxAttempts", "budgetMs"])
def test_stored_garbage_keeps_the_default(key: str, garbage: Any) -> None:
    assert _document({key: garbage}) == DEFAULT_DOCUMENT


@pytest.mark.parametrize("garbage", ["false", 0, None, [], "off"])
def test_a_stored_enabled_must_be_a_real_boolean(garbage: Any) -> None:
    assert _wait({"enabled": garbage}).enabled is True
    assert _wait({"enabled": False}).enabled is False


@pytest.mark.parametrize(
    ("stored", "budget"),
    [
        ({"budgetMs": 10_000}, 90_000),  # below the default maxWaitMs: floored at it
        ({"budgetMs": -5}, 90_000),
        ({"maxWaitMs": 200_000, "budgetMs": 150_000}, 200_000),
        ({"maxWaitMs": 300_000}, 300_000),
        ({"maxWaitMs": 1_000, "budgetMs": 1_000}, 1_000),  # equal is fine
        ({"maxWaitMs": 1_000, "budgetMs": 0}, 1_000),
        ({"maxWaitMs": 0, "budgetMs": 0}, 0),
    ],
)
def test_a_stored_budget_is_floored_at_the_longest_wait(
    stored: dict[str, int], budget: int
) -> None:
    assert _wait(stored).budget_ms == budget
    assert _document(stored)["budgetMs"] == budget


@pytest.mark.parametrize(
    ("stored", "enabled"),
    [
        ({"maxWaitMs": 0}, False),
        ({"maxAttempts": 0}, False),
        ({"enabled": True, "maxWaitMs": 0, "maxAttempts": 3}, False),
        ({"enabled": True, "maxWaitMs": "0"}, False),
        ({"maxAttempts": -2}, False),  # clamped to 0 first
        ({"maxWaitMs": 1, "maxAttempts": 1}, True),
        ({"enabled": False, "maxWaitMs": 5_000}, False),
    ],
)
def test_enabled_is_forced_off_by_a_zero_wait_or_attempt_count(
    stored: dict[str, Any], enabled: bool
) -> None:
    assert _wait(stored).enabled is enabled
    assert _document(stored)["enabled"] is enabled


def test_a_section_that_is_not_an_object_keeps_every_default() -> None:
    assert _wait([1, 2]) == ComboCooldownWaitSettings()


def test_the_document_round_trips() -> None:
    stored = {SECTION: {"maxWaitMs": 20_000, "maxAttempts": 2, "budgetMs": 60_000}}
    document = SETTINGS.render(SETTINGS.resolve(stored, NO_ENV))

    assert document[SECTION] == {
        "enabled": True,
        "maxWaitMs": 20_000,
        "maxAttempts": 2,
        "budgetMs": 60_000,
    }
    assert SETTINGS.resolve(document, NO_ENV) == SETTINGS.resolve(stored, NO_ENV)


# --- strict patches ----------------------------------------------------------------------------

REJECTED = [
    ({"maxRetryWaitSec": 90}, "maxRetryWaitSec", "unknown key"),  # waitForCooldown's field
    ({"enabled": "yes"}, "enabled", "must be a boolean"),
    ({"enabled": 1}, "enabled", "must be a boolean"),
    ({"maxWaitMs": -1}, "maxWaitMs", "must be between 0 and 300000"),
    ({"maxWaitMs": 300_001}, "maxWaitMs", "must be between 0 and 300000"),
    ({"maxWaitMs": "90000"}, "maxWaitMs", "must be an integer"),
    ({"maxAttempts": 11}, "maxAttempts", "must be between 0 and 10"),
    ({"maxAttempts": -1}, "maxAttempts", "must be between 0 and 10"),
    ({"maxAttempts": 2.5}, "maxAttempts", "must be an integer"),
    ({"budgetMs": 300_001}, "budgetMs", "must be between 0 and 300000"),
    ({"budgetMs": None}, "budgetMs", "must be an integer"),
    ({"budgetMs": 89_999}, "budgetMs", "must be at least maxWaitMs (90000)"),
    # Both changed: the rule names the lower field, as for the other minimum/maximum pairs.
    ({"maxWaitMs": 60_000, "budgetMs": 30_000}, "maxWaitMs", "must not exceed budgetMs (30000)"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("section", "key", "message"), REJECTED)
def test_the_api_rejects_a_bad_value(
    manage_client: APIClient, section: dict[str, Any], key: str, message: str
) -> None:
    response = manage_client.patch(URL, {SECTION: section}, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_settings")
    assert error["fields"] == {f"{SECTION}.{key}": message}
    assert f"{SECTION}.{key}" in error["message"]
    assert not ResilienceSettingsRow.objects.exists()


def test_a_longer_wait_than_the_stored_budget_is_refused() -> None:
    current = {SECTION: {"maxWaitMs": 10_000, "budgetMs": 20_000}}

    assert _errors({SECTION: {"maxWaitMs": 20_000}}, current) == {}
    assert _errors({SECTION: {"maxWaitMs": 20_001}}, current) == {
        f"{SECTION}.maxWaitMs": "must not exceed budgetMs (20000)"
    }
    assert _errors({SECTION: {"maxWaitMs": 30_000, "budgetMs": 30_000}}, current) == {}


def test_every_bad_field_is_named_and_a_section_must_be_an_object() -> None:
    assert _errors({SECTION: {"maxWaitMs": -1, "maxAttempts": 11, "enabled": False}}) == {
        f"{SECTION}.maxWaitMs": "must be between 0 and 300000",
        f"{SECTION}.maxAttempts": "must be between 0 and 10",
    }
    assert _errors({SECTION: True}) == {SECTION: "must be an object"}


def test_the_bounds_themselves_are_accepted() -> None:
    assert _errors({SECTION: {"maxWaitMs": 0, "maxAttempts": 0, "budgetMs": 0}}) == {}
    assert _errors({SECTION: {"maxWaitMs": 300_000, "maxAttempts": 10, "budgetMs": 300_000}}) == {}


# --- the API -----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_a_patch_round_trips_through_get(manage_client: APIClient) -> None:
    patch = {SECTION: {"maxWaitMs": 30_000, "budgetMs": 45_000}}

    response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["ok"] is True
    expected = {**DEFAULT_DOCUMENT, "maxWaitMs": 30_000, "budgetMs": 45_000}
    assert response.json()[SECTION] == expected
    assert ResilienceSettingsRow.objects.get().document == patch  # only what was set is stored

    manage_client.patch(URL, {SECTION: {"maxAttempts": 0}}, format="json")

    # A zero attempt count turns the wait off; the stored enabled is untouched.
    assert manage_client.get(URL).json()[SECTION] == {
        **expected,
        "maxAttempts": 0,
        "enabled": False,
    }
    assert ResilienceSettingsRow.objects.get().document == {
        SECTION: {"maxWaitMs": 30_000, "budgetMs": 45_000, "maxAttempts": 0}
    }


# --- should_wait ------------------------------------------------------------------

WAIT = ComboCooldownWaitSettings(max_wait_ms=10_000, max_attempts=3, budget_ms=30_000)


def test_the_reason_lists() -> None:
    assert ALLOWED_REASONS == {
        "rate_limit",
        "rate_limited",
        "transient",
        "overloaded",
        "server_error",
        "circuit_open",
    }
    assert DENIED_REASONS == {"quota_exhausted", "auth_error", "not_found", "not_found_local"}
    assert not ALLOWED_REASONS & DENIED_REASONS


@pytest.mark.parametrize("reason", sorted(ALLOWED_REASONS))
def test_an_allowed_reason_waits(reason: str) -> None:
    assert should_wait(reason, 5_000, 0, 30_000, WAIT) == (True, 5_000)


@pytest.mark.parametrize(
    "reason",
    [*sorted(DENIED_REASONS), "", None, "unknown", "RATE_LIMIT", " rate_limit", "timeout"],
)
def test_a_denied_unknown_or_missing_reason_never_waits(reason: str | None) -> None:
    assert should_wait(reason, 5_000, 0, 30_000, WAIT) == (False, 5_000)


@pytest.mark.parametrize(
    ("wait_ms", "coerced"),
    [
        (0, 0),
        (-1, 0),
        (-0.5, 0),
        (math.nan, 0),
        (math.inf, 0),
        (-math.inf, 0),
        (0.2, 1),
        (1, 1),
        (2_500.5, 2_501),
    ],
)
def test_the_wait_is_coerced_and_returned_either_way(wait_ms: float, coerced: int) -> None:
    waits, returned = should_wait("rate_limit", wait_ms, 0, 30_000, WAIT)
    assert returned == coerced
    assert waits is (coerced > 0)


@pytest.mark.parametrize(
    ("wait_ms", "waits"), [(9_999, True), (10_000, True), (10_001, False), (60_000, False)]
)
def test_a_wait_longer_than_max_wait_is_refused(wait_ms: int, waits: bool) -> None:
    assert should_wait("transient", wait_ms, 0, 30_000, WAIT) == (waits, wait_ms)


@pytest.mark.parametrize(
    ("attempt", "waits"), [(0, True), (1, True), (2, True), (3, False), (9, False)]
)
def test_the_attempts_are_bounded(attempt: int, waits: bool) -> None:
    assert should_wait("overloaded", 1_000, attempt, 30_000, WAIT)[0] is waits


@pytest.mark.parametrize(
    ("budget_left_ms", "waits"),
    [(30_000, True), (5_000, True), (4_999.9, False), (0, False), (-1, False), (math.nan, False)],
)
def test_the_budget_left_must_cover_the_wait(budget_left_ms: float, waits: bool) -> None:
    assert should_wait("server_error", 5_000, 0, budget_left_ms, WAIT)[0] is waits


@pytest.mark.parametrize(
    "settings",
    [
        ComboCooldownWaitSettings(enabled=False),
        ComboCooldownWaitSettings(max_wait_ms=0),  # built by hand, not resolved: still no wait
        ComboCooldownWaitSettings(max_attempts=0),
        SETTINGS.resolve({SECTION: {"maxAttempts": 0}}, NO_ENV)[COMBO_COOLDOWN_WAIT],
    ],
)
def test_disabled_settings_never_wait(settings: ComboCooldownWaitSettings) -> None:
    assert should_wait("rate_limit", 1_000, 0, 300_000, settings) == (False, 1_000)
    assert should_wait("rate_limit", 1_000, 0, 300_000, ComboCooldownWaitSettings()) == (
        True,
        1_000,
    )


def test_the_deny_list_wins_over_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import resilience.domain.attempts.cooldown_wait as module

    monkeypatch.setattr(module, "ALLOWED_REASONS", ALLOWED_REASONS | {"auth_error"})
    assert should_wait("auth_error", 1_000, 0, 30_000, WAIT) == (False, 1_000)
    assert should_wait("transient", 1_000, 0, 30_000, WAIT) == (True, 1_000)
