"""The resilience settings document, pure: defaults, env, lenient resolve, strict patches."""

from __future__ import annotations

from typing import Any

import pytest

from omniroute.core.settings import ROOT_FIELD, SETTINGS, Kind, SettingsError, flatten, merge
from resilience.domain.profiles import ProfileName
from resilience.domain.settings.document import (
    PROVIDER_BREAKER,
    PROVIDER_COOLDOWN,
    BreakerSettings,
    ProviderCooldownSettings,
)

NO_ENV: dict[str, str] = {}
APIKEY_FAILURE = "providerBreaker.apikey.failureThreshold"
APIKEY_DEGRADATION = "providerBreaker.apikey.degradationThreshold"
MIN_COOLDOWN = "providerCooldown.minRetryCooldownMs"
MAX_COOLDOWN = "providerCooldown.maxRetryCooldownMs"
INT_PATHS = [path for path, spec in SETTINGS.schema.fields.items() if spec.kind is Kind.INT]


def _errors(patch: Any, current: dict[str, Any] | None = None) -> dict[str, str]:
    with pytest.raises(SettingsError) as raised:
        SETTINGS.validate_patch(patch, current)
    return raised.value.errors


def _defaults(env: dict[str, str] | None = None) -> dict[str, Any]:
    return SETTINGS.render(SETTINGS.resolve({}, env or NO_ENV))


# --- defaults and environment -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (ProfileName.OAUTH, BreakerSettings(8, 5, 60_000)),
        (ProfileName.APIKEY, BreakerSettings(12, 7, 30_000)),
        # derived degradation ceil(60 % of 2) = 2, forced to failureThreshold - 1
        (ProfileName.LOCAL, BreakerSettings(2, 1, 15_000)),
    ],
)
def test_breaker_defaults_per_profile(profile: ProfileName, expected: BreakerSettings) -> None:
    assert SETTINGS.resolve({}, NO_ENV)[PROVIDER_BREAKER][profile] == expected


def test_provider_cooldown_defaults() -> None:
    cooldown = SETTINGS.resolve({}, NO_ENV)[PROVIDER_COOLDOWN]
    assert cooldown == ProviderCooldownSettings(False, 5_000, 300_000)


def test_document_shape_covers_the_schema() -> None:
    document = _defaults()

    assert list(document) == [
        "providerBreaker",
        "providerCooldown",
        "connectionCooldown",
        "modelLockout",
        "availability",
        "attempts",
        "streamRecovery",
        "requestQueue",
        "quotaShareConcurrencyLimit",
        "comboCooldownWait",
        "sessionAffinity",
    ]
    assert list(document["providerBreaker"]) == ["oauth", "apikey", "local"]
    assert set(flatten(document)) == set(SETTINGS.schema.fields)


def test_breaker_env_overrides_come_from_the_profiles() -> None:
    env = {
        "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD": "20",
        "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS": "45000",
        "OMNIROUTE_PROVIDER_BREAKER_OAUTH_DEGRADATION_THRESHOLD": "3",
    }
    settings = SETTINGS.resolve({}, env)

    assert settings[PROVIDER_BREAKER][ProfileName.APIKEY] == BreakerSettings(20, 7, 45_000)
    assert settings[PROVIDER_BREAKER][ProfileName.OAUTH] == BreakerSettings(8, 3, 60_000)


def test_env_defaults_are_clamped_and_kept_consistent() -> None:
    env = {
        "OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD": "0",
        "OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS": "5",
        "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD": "5",  # below the default degradation 7
    }
    settings = SETTINGS.resolve({}, env)

    # A threshold of 1 is refused: an env 0 is clamped to 2.
    assert settings[PROVIDER_BREAKER][ProfileName.OAUTH] == BreakerSettings(2, 1, 1_000)
    assert settings[PROVIDER_BREAKER][ProfileName.APIKEY].degradation_threshold == 4


@pytest.mark.parametrize(
    ("raw", "enabled"),
    [(" TRUE ", True), ("1", True), ("on", True), ("yes", False), ("", False), ("false", False)],
)
def test_provider_cooldown_enabled_by_env(raw: str, enabled: bool) -> None:
    env = {"PROVIDER_COOLDOWN_ENABLED": raw}
    assert SETTINGS.resolve({}, env)[PROVIDER_COOLDOWN].enabled is enabled


def test_stored_enabled_wins_over_env() -> None:
    stored = {"providerCooldown": {"enabled": False}}
    env = {"PROVIDER_COOLDOWN_ENABLED": "true"}
    assert SETTINGS.resolve(stored, env)[PROVIDER_COOLDOWN].enabled is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"PROVIDER_COOLDOWN_MIN_MS": "1000", "PROVIDER_COOLDOWN_MAX_MS": "60000"},
            (1_000, 60_000),
        ),
        ({"PROVIDER_COOLDOWN_MIN_MS": "abc", "PROVIDER_COOLDOWN_MAX_MS": ""}, (5_000, 300_000)),
        ({"PROVIDER_COOLDOWN_MIN_MS": "99999999"}, (3_600_000, 3_600_000)),
        ({"PROVIDER_COOLDOWN_MAX_MS": "100"}, (5_000, 5_000)),
    ],
)
def test_provider_cooldown_env(env: dict[str, str], expected: tuple[int, int]) -> None:
    cooldown = SETTINGS.resolve({}, env)[PROVIDER_COOLDOWN]
    assert (cooldown.min_retry_cooldown_ms, cooldown.max_retry_cooldown_ms) == expected


def test_stored_values_win_over_env() -> None:
    stored = {"providerBreaker": {"apikey": {"failureThreshold": 30}}}
    env = {"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD": "20"}
    assert (
        SETTINGS.resolve(stored, env)[PROVIDER_BREAKER][ProfileName.APIKEY].failure_threshold == 30
    )


# --- lenient resolve ("toInteger") --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (20, 20),
        (20.9, 20),
        ("20", 20),
        (" 20.7 ", 20),
        ("2e1", 20),
        (-3, 2),
        ("0", 2),
        (5_000, 1000),
        (None, 12),
        (True, 12),
        ("", 12),
        ("abc", 12),
        ("1_000", 12),
        ("NaN", 12),
        (float("inf"), 12),
        ([20], 12),
        ({"value": 20}, 12),
    ],
)
def test_resolve_reads_integers_leniently(raw: Any, expected: int) -> None:
    stored = {"providerBreaker": {"apikey": {"failureThreshold": raw, "degradationThreshold": 1}}}
    breaker = SETTINGS.resolve(stored, NO_ENV)[PROVIDER_BREAKER][ProfileName.APIKEY]
    assert breaker.failure_threshold == expected


@pytest.mark.parametrize("raw", ["true", 1, None, "on"])
def test_resolve_takes_only_real_booleans(raw: Any) -> None:
    stored = {"providerCooldown": {"enabled": raw}}
    assert SETTINGS.resolve(stored, NO_ENV)[PROVIDER_COOLDOWN].enabled is False
    assert SETTINGS.resolve({"providerCooldown": {"enabled": True}}, NO_ENV)[
        PROVIDER_COOLDOWN
    ].enabled


@pytest.mark.parametrize(
    ("failure", "degradation", "expected"),
    [(10, 20, 9), (10, 3, 3), (2, 5, 1), (2, 2, 1)],
)
def test_resolve_forces_degradation_below_failure(
    failure: int, degradation: int, expected: int
) -> None:
    stored = {"providerBreaker": {"oauth": {"failureThreshold": failure}}}
    stored["providerBreaker"]["oauth"]["degradationThreshold"] = degradation
    breaker = SETTINGS.resolve(stored, NO_ENV)[PROVIDER_BREAKER][ProfileName.OAUTH]
    assert (breaker.failure_threshold, breaker.degradation_threshold) == (failure, expected)


def test_resolve_raises_max_cooldown_to_min() -> None:
    stored = {"providerCooldown": {"minRetryCooldownMs": 90_000, "maxRetryCooldownMs": 1_000}}
    cooldown = SETTINGS.resolve(stored, NO_ENV)[PROVIDER_COOLDOWN]
    assert (cooldown.min_retry_cooldown_ms, cooldown.max_retry_cooldown_ms) == (90_000, 90_000)


@pytest.mark.parametrize(
    "stored",
    [
        {"providerBreaker": 5},
        {"providerBreaker": {"oauth": "x"}, "providerCooldown": []},
        {"unknown": {"a": 1}, "providerCooldown": {"other": 1}},
    ],
)
def test_resolve_ignores_malformed_and_unknown_parts(stored: dict[str, Any]) -> None:
    assert SETTINGS.render(SETTINGS.resolve(stored, NO_ENV)) == _defaults()


def test_resolved_documents_round_trip_and_pass_the_strict_check() -> None:
    env = {"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD": "0", "PROVIDER_COOLDOWN_MAX_MS": "9"}
    settings = SETTINGS.resolve({"providerBreaker": {"oauth": {"failureThreshold": "3"}}}, env)
    document = SETTINGS.render(settings)

    assert SETTINGS.resolve(document, NO_ENV) == settings
    assert SETTINGS.validate_patch(document) == document


# --- strict patches ---------------------------------------------------------------------------


@pytest.mark.parametrize("patch", [None, [], "providerBreaker", 12])
def test_patch_must_be_an_object(patch: Any) -> None:
    assert _errors(patch) == {ROOT_FIELD: "must be a JSON object"}


def test_patch_needs_a_known_section() -> None:
    assert set(_errors({})) == {ROOT_FIELD}
    assert set(_errors({"requestQueues": {}})) == {ROOT_FIELD, "requestQueues"}


@pytest.mark.parametrize(
    ("patch", "path", "message"),
    [
        ({"providerCooldown": {}, "bogus": 1}, "bogus", "unknown section"),
        ({"providerCooldown": {"enable": True}}, "providerCooldown.enable", "unknown key"),
        ({"providerBreaker": {"byok": {}}}, "providerBreaker.byok", "unknown key"),
        (
            {"providerBreaker": {"oauth": {"resetTimeout": 5_000}}},
            "providerBreaker.oauth.resetTimeout",
            "unknown key",
        ),
        (
            {"providerBreaker": {"oauth.failureThreshold": 3}},
            "providerBreaker.oauth.failureThreshold",
            "unknown key",
        ),
        ({"providerBreaker": 5}, "providerBreaker", "must be an object"),
        ({"providerBreaker": {"oauth": [3]}}, "providerBreaker.oauth", "must be an object"),
        ({"providerCooldown": {"enabled": 1}}, "providerCooldown.enabled", "must be a boolean"),
        (
            {"providerCooldown": {"enabled": "true"}},
            "providerCooldown.enabled",
            "must be a boolean",
        ),
        ({"providerCooldown": {"minRetryCooldownMs": True}}, MIN_COOLDOWN, "must be an integer"),
        ({"providerCooldown": {"minRetryCooldownMs": "6000"}}, MIN_COOLDOWN, "must be an integer"),
        ({"providerCooldown": {"minRetryCooldownMs": 6000.5}}, MIN_COOLDOWN, "must be an integer"),
        ({"providerCooldown": {"minRetryCooldownMs": None}}, MIN_COOLDOWN, "must be an integer"),
    ],
)
def test_patch_rejects(patch: dict[str, Any], path: str, message: str) -> None:
    assert _errors(patch)[path] == message


@pytest.mark.parametrize("path", INT_PATHS)
def test_patch_rejects_out_of_range_values(path: str) -> None:
    spec = SETTINGS.schema.fields[path]
    expected = f"must be between {spec.minimum} and {spec.maximum}"
    for value in (spec.minimum - 1, spec.maximum + 1):
        assert _errors({path.split(".")[0]: _nested(path, value)}) == {path: expected}


@pytest.mark.parametrize("path", INT_PATHS)
def test_patch_accepts_both_bounds(path: str) -> None:
    spec = SETTINGS.schema.fields[path]
    for value in (spec.minimum, spec.maximum):
        patch = {path.split(".")[0]: _nested(path, value)}
        assert flatten(SETTINGS.validate_patch(patch)) == {path: value}


def _nested(path: str, value: int) -> Any:
    node: Any = value
    for part in reversed(path.split(".")[1:]):
        node = {part: node}
    return node


def test_patch_accepts_integral_floats_as_integers() -> None:
    patch = SETTINGS.validate_patch({"providerBreaker": {"oauth": {"failureThreshold": 9.0}}})
    value = patch["providerBreaker"]["oauth"]["failureThreshold"]
    assert value == 9
    assert type(value) is int


def test_patch_reports_every_bad_field() -> None:
    patch = {
        "providerBreaker": {"apikey": {"failureThreshold": 0, "resetTimeoutMs": "1s"}},
        "providerCooldown": {"enabled": "no"},
    }
    assert set(_errors(patch)) == {
        APIKEY_FAILURE,
        "providerBreaker.apikey.resetTimeoutMs",
        "providerCooldown.enabled",
    }


@pytest.mark.parametrize(("failure", "degradation"), [(10, 10), (10, 11), (2, 5)])
def test_patch_rejects_degradation_not_below_failure(failure: int, degradation: int) -> None:
    patch = {"providerBreaker": {"apikey": {"failureThreshold": failure}}}
    patch["providerBreaker"]["apikey"]["degradationThreshold"] = degradation
    assert _errors(patch) == {APIKEY_DEGRADATION: f"must be less than failureThreshold ({failure})"}


def test_patch_refuses_a_failure_threshold_of_one() -> None:
    patch = {"providerBreaker": {"apikey": {"failureThreshold": 1}}}
    assert _errors(patch, _defaults()) == {APIKEY_FAILURE: "must be between 2 and 1000"}


def test_patch_checks_degradation_against_the_current_failure() -> None:
    patch = {"providerBreaker": {"apikey": {"degradationThreshold": 12}}}  # current failure: 12

    assert _errors(patch, _defaults()) == {
        APIKEY_DEGRADATION: "must be less than failureThreshold (12)"
    }
    assert SETTINGS.validate_patch(patch) == patch  # nothing to compare with


def test_patch_lowering_failure_below_current_degradation_names_failure() -> None:
    patch = {"providerBreaker": {"apikey": {"failureThreshold": 7}}}  # current degradation: 7
    assert _errors(patch, _defaults()) == {
        APIKEY_FAILURE: "must be greater than degradationThreshold (7)"
    }


def test_patch_rejects_min_cooldown_above_max() -> None:
    patch = {"providerCooldown": {"minRetryCooldownMs": 60_000, "maxRetryCooldownMs": 30_000}}
    assert _errors(patch) == {MIN_COOLDOWN: "must not exceed maxRetryCooldownMs (30000)"}


def test_patch_checks_cooldowns_against_the_current_document() -> None:
    current = _defaults()  # 5 000 .. 300 000
    too_high_min = {"providerCooldown": {"minRetryCooldownMs": 400_000}}
    too_low_max = {"providerCooldown": {"maxRetryCooldownMs": 4_000}}

    assert _errors(too_high_min, current) == {
        MIN_COOLDOWN: "must not exceed maxRetryCooldownMs (300000)"
    }
    assert _errors(too_low_max, current) == {
        MAX_COOLDOWN: "must be at least minRetryCooldownMs (5000)"
    }
    assert SETTINGS.validate_patch({"providerCooldown": {"maxRetryCooldownMs": 5_000}}, current)


def test_settings_error_message_names_the_fields() -> None:
    error = SettingsError({APIKEY_FAILURE: "must be between 1 and 1000"})
    assert str(error) == f"{APIKEY_FAILURE}: must be between 1 and 1000"


# --- merge --------------------------------------------------------------------------------------


def test_merge_keeps_omitted_fields() -> None:
    stored: dict[str, Any] = {
        "providerBreaker": {"oauth": {"failureThreshold": 9, "resetTimeoutMs": 2_000}},
        "providerCooldown": {"enabled": True},
    }
    patch = {
        "providerBreaker": {"oauth": {"failureThreshold": 4}, "apikey": {"resetTimeoutMs": 5_000}}
    }

    merged = merge(stored, patch)

    assert merged == {
        "providerBreaker": {
            "oauth": {"failureThreshold": 4, "resetTimeoutMs": 2_000},
            "apikey": {"resetTimeoutMs": 5_000},
        },
        "providerCooldown": {"enabled": True},
    }
    assert stored["providerBreaker"]["oauth"]["failureThreshold"] == 9  # not mutated
    merged["providerCooldown"]["enabled"] = False
    assert stored["providerCooldown"]["enabled"] is True  # no shared nodes


def test_merge_replaces_malformed_stored_nodes() -> None:
    patch = {"providerCooldown": {"enabled": True}}
    assert merge({"providerCooldown": "junk", "legacy": 1}, patch) == {**patch, "legacy": 1}
