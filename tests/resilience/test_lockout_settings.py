"""The ``modelLockout`` settings card: resolve, strict patch, snapshot,
``/api/resilience`` and the admin settings page; its retired switch ``enabled``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, SettingsError, flatten
from resilience.admin.settings import field_name
from resilience.domain.lockout import LockoutSettings
from resilience.domain.settings.document import MODEL_LOCKOUT
from resilience.domain.settings.schema import DEFAULT_MODEL_LOCKOUT_SETTINGS
from resilience.models import ResilienceSettings
from resilience.services import resilience_settings_document, resilience_settings_update
from routing.selectors import config_snapshot_build

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
CHANGE_URL = reverse("admin:resilience_resiliencesettings_change", args=[1])
DEFAULT_SECTION = {
    "errorCodes": [408, 429, 500, 502, 503, 504, 529],
    "baseCooldownMs": 120_000,
    "maxCooldownMs": 1_800_000,
    "maxBackoffSteps": 10,
    "useExponentialBackoff": True,
}
LIST_MESSAGE = "must be a non-empty list of integers between 100 and 599, without 404"


def _resolved(**section: Any) -> LockoutSettings:
    return SETTINGS.resolve({"modelLockout": section}, NO_ENV)[MODEL_LOCKOUT]


def _errors(section: dict[str, Any], current: dict[str, Any] | None = None) -> dict[str, str]:
    with pytest.raises(SettingsError) as raised:
        SETTINGS.validate_patch({"modelLockout": section}, current)
    return raised.value.errors


def _stored() -> dict[str, Any] | None:
    row = ResilienceSettings.objects.filter(pk=1).first()
    return None if row is None else row.document


# --- resolve ------------------------------------------------------------------------------------


def test_defaults_are_the_card_without_a_switch() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)

    assert settings[MODEL_LOCKOUT] == DEFAULT_MODEL_LOCKOUT_SETTINGS == LockoutSettings()
    assert SETTINGS.render(settings)["modelLockout"] == DEFAULT_SECTION  # no "enabled"


@pytest.mark.parametrize("raw", [True, False, "1", 0])
def test_a_stored_switch_is_ignored_and_not_shown(raw: Any) -> None:
    settings = SETTINGS.resolve({"modelLockout": {"enabled": raw}}, NO_ENV)

    assert settings[MODEL_LOCKOUT] == LockoutSettings()
    assert "enabled" not in SETTINGS.render(settings)["modelLockout"]


@pytest.mark.parametrize(
    ("raw", "codes"),
    [
        ([429, 503], (429, 503)),
        ([429, "503", 502.7, 429], (429, 503, 502)),  # numbers kept, truncated, once each
        ([404, 429, 404.2], (429,)),  # a 404 never counts: dropped
        ([404], DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes),
        ([700, 99, 429, None, "x", True, float("nan")], (429,)),
        ([], DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes),
        ([600, 42], DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes),  # nothing left → the default
        ("429", DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes),
        (None, DEFAULT_MODEL_LOCKOUT_SETTINGS.error_codes),
    ],
)
def test_error_codes_keep_statuses_100_to_599(raw: Any, codes: tuple[int, ...]) -> None:
    assert _resolved(errorCodes=raw).error_codes == codes


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"baseCooldownMs": 1}, (5_000, 1_800_000, 10)),
        ({"baseCooldownMs": "9e9"}, (600_000, 1_800_000, 10)),
        ({"maxCooldownMs": 10**10}, (120_000, 3_600_000, 10)),
        ({"maxCooldownMs": 0}, (120_000, 120_000, 10)),  # clamped to 5 000, raised to the base
        ({"baseCooldownMs": 300_000, "maxCooldownMs": 60_000}, (300_000, 300_000, 10)),
        ({"maxBackoffSteps": -1}, (120_000, 1_800_000, 0)),
        ({"maxBackoffSteps": "50"}, (120_000, 1_800_000, 20)),
    ],
)
def test_numbers_are_clamped_and_max_raised_to_base(
    section: dict[str, Any], expected: tuple[int, int, int]
) -> None:
    lockout = _resolved(**section)
    assert (lockout.base_cooldown_ms, lockout.max_cooldown_ms, lockout.max_backoff_steps) == (
        expected
    )


def test_use_exponential_backoff_takes_only_real_booleans() -> None:
    assert _resolved(useExponentialBackoff=False).use_exponential_backoff is False
    assert _resolved(useExponentialBackoff="false").use_exponential_backoff is True


# --- strict patch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "path", "message"),
    [
        ({"errorCodes": []}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": [404, 429]}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": 429}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": None}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": [429, 600]}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": [99]}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": ["429"]}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": [True]}, "errorCodes", LIST_MESSAGE),
        ({"errorCodes": [429.5]}, "errorCodes", LIST_MESSAGE),
        ({"baseCooldownMs": 4_999}, "baseCooldownMs", "must be between 5000 and 600000"),
        ({"maxCooldownMs": 3_600_001}, "maxCooldownMs", "must be between 5000 and 3600000"),
        ({"maxBackoffSteps": 21}, "maxBackoffSteps", "must be between 0 and 20"),
        ({"useExponentialBackoff": "no"}, "useExponentialBackoff", "must be a boolean"),
        ({"cooldownMs": 1}, "cooldownMs", "unknown key"),
    ],
)
def test_patch_rejects(section: dict[str, Any], path: str, message: str) -> None:
    assert _errors(section) == {f"modelLockout.{path}": message}


def test_patch_accepts_a_whole_card() -> None:
    section = {**DEFAULT_SECTION, "errorCodes": [429, 503.0]}
    patch = SETTINGS.validate_patch({"modelLockout": section})
    assert patch["modelLockout"] == {**section, "errorCodes": [429, 503]}


@pytest.mark.parametrize("raw", [True, False, "true", 1, None, {"x": 1}])
def test_patch_accepts_the_retired_switch_whatever_its_value_and_drops_it(raw: Any) -> None:
    patch = {"modelLockout": {"enabled": raw, "maxBackoffSteps": 4}}

    assert SETTINGS.validate_patch(patch) == {"modelLockout": {"maxBackoffSteps": 4}}
    assert list(SETTINGS.retired_in(patch)) == ["modelLockout.enabled"]
    assert SETTINGS.validate_patch({"modelLockout": {"enabled": raw}}) == {}
    assert SETTINGS.retired_in({"modelLockout": {"maxBackoffSteps": 4}}) == {}


def test_patch_rejects_max_below_base() -> None:
    current = SETTINGS.render(SETTINGS.resolve({}, NO_ENV))  # base 120 000, max 1 800 000

    assert _errors({"maxCooldownMs": 60_000}, current) == {
        "modelLockout.maxCooldownMs": "must be at least baseCooldownMs (120000)"
    }
    assert _errors({"baseCooldownMs": 300_000, "maxCooldownMs": 200_000}) == {
        "modelLockout.baseCooldownMs": "must not exceed maxCooldownMs (200000)"
    }
    assert SETTINGS.validate_patch({"modelLockout": {"maxCooldownMs": 120_000}}, current)


# --- snapshot -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_snapshot_defaults_to_the_default_card_and_cap() -> None:
    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.lockout == LockoutSettings()
    assert snapshot.cooldown_profile("openai").max_cooldown_ms == 1_800_000


@pytest.mark.django_db
def test_snapshot_carries_the_card_and_its_cap_reaches_connection_cooldowns() -> None:
    section = {"enabled": True, "errorCodes": [429], "maxCooldownMs": 900_000, "maxBackoffSteps": 3}
    resilience_settings_update(patch={"modelLockout": section})

    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.lockout == LockoutSettings((429,), 120_000, 900_000, 3, True)
    assert snapshot.cooldown_profile("openai").max_cooldown_ms == 900_000
    assert snapshot.cooldown_profile("ollama-local").max_cooldown_ms == 900_000


# --- API ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_get_shows_the_card(manage_client: APIClient) -> None:
    assert manage_client.get(URL).json()["modelLockout"] == DEFAULT_SECTION


@pytest.mark.django_db
def test_patch_persists_only_the_changes(manage_client: APIClient) -> None:
    patch = {"modelLockout": {"errorCodes": [429, 503]}}

    response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    expected = {**DEFAULT_SECTION, "errorCodes": [429, 503]}
    assert response.json()["modelLockout"] == expected
    assert manage_client.get(URL).json()["modelLockout"] == expected
    assert _stored() == patch
    assert "X-OmniRoute-Warning" not in response


@pytest.mark.django_db
def test_patch_ignores_the_retired_switch_with_a_deprecation_warning(
    manage_client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    patch = {"modelLockout": {"enabled": True, "errorCodes": [429, 503]}}

    with caplog.at_level(logging.WARNING, logger="resilience.api.settings"):
        response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    assert response["X-OmniRoute-Warning"].startswith("modelLockout.enabled is retired: ignored.")
    assert response.json()["modelLockout"] == {**DEFAULT_SECTION, "errorCodes": [429, 503]}
    assert _stored() == {"modelLockout": {"errorCodes": [429, 503]}}
    assert "modelLockout.enabled is retired" in caplog.text
    alone = manage_client.patch(URL, {"modelLockout": {"enabled": False}}, format="json")
    assert alone.status_code == 200 and "modelLockout.enabled" in alone["X-OmniRoute-Warning"]
    assert "enabled" not in manage_client.get(URL).json()["modelLockout"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        ({"errorCodes": []}, "modelLockout.errorCodes", LIST_MESSAGE),
        ({"errorCodes": [404]}, "modelLockout.errorCodes", LIST_MESSAGE),
        (
            {"maxCooldownMs": 60_000},
            "modelLockout.maxCooldownMs",
            "must be at least baseCooldownMs (120000)",
        ),
    ],
)
def test_bad_patch_is_400_naming_the_field(
    manage_client: APIClient, section: dict[str, Any], field: str, message: str
) -> None:
    response = manage_client.patch(URL, {"modelLockout": section}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["fields"]) == ("invalid_settings", {field: message})
    assert _stored() is None


@pytest.mark.django_db
def test_schema_documents_error_codes_as_a_list(manage_client: APIClient) -> None:
    schema = manage_client.get("/api/schema/", {"format": "json"}).json()
    get = schema["paths"]["/api/resilience"]["get"]["responses"]["200"]["content"]
    card = get["application/json"]["schema"]["properties"]["modelLockout"]["properties"]
    assert card["errorCodes"] == {
        "type": "array",
        "items": {"type": "integer", "minimum": 100, "maximum": 599},
        "minItems": 1,
    }
    assert "enabled" not in card
    patch = schema["paths"]["/api/resilience"]["patch"]["requestBody"]["content"]
    retired = patch["application/json"]["schema"]["properties"]["modelLockout"]["properties"]
    assert retired["enabled"]["deprecated"] is True


# --- admin settings page ------------------------------------------------------------------------


def _form(**changes: Any) -> dict[str, str]:
    """The settings page as submitted: the current values, ``changes`` keyed by dotted path."""
    values: dict[str, Any] = {**flatten(resilience_settings_document()), **changes}
    data = {
        field_name(path): ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        for path, value in values.items()
        if not isinstance(value, bool | None)
    }
    data.update({field_name(path): "on" for path, value in values.items() if value is True})
    return {**data, "_save": "Save"}


@pytest.mark.django_db
def test_admin_page_shows_the_card(staff_client: Client) -> None:
    page = staff_client.get(CHANGE_URL).content.decode()

    assert "modelLockout.errorCodes" in page
    assert 'value="408, 429, 500, 502, 503, 504, 529"' in page
    assert "modelLockout.enabled" not in page
    assert field_name("modelLockout.enabled") not in page


@pytest.mark.django_db
def test_admin_saves_error_codes_typed_as_text(staff_client: Client) -> None:
    form = _form(**{"modelLockout.errorCodes": "429,503  504"})

    response = staff_client.post(CHANGE_URL, form)

    assert response.status_code == 302, response.content
    assert _stored() == {"modelLockout": {"errorCodes": [429, 503, 504]}}


@pytest.mark.django_db
def test_admin_unchanged_codes_are_not_saved(staff_client: Client) -> None:
    response = staff_client.post(CHANGE_URL, _form(**{"modelLockout.maxBackoffSteps": 4}))

    assert response.status_code == 302, response.content
    assert _stored() == {"modelLockout": {"maxBackoffSteps": 4}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("codes", "message"),
    [("", LIST_MESSAGE), ("429, 700", LIST_MESSAGE), ("429, abc", "Enter whole numbers")],
)
def test_admin_rejects_bad_codes(staff_client: Client, codes: str, message: str) -> None:
    response = staff_client.post(CHANGE_URL, _form(**{"modelLockout.errorCodes": codes}))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in errors[field_name("modelLockout.errorCodes")][0]
    assert _stored() is None
