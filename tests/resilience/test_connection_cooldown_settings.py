"""``connectionCooldown``: defaults, strict patches, the 429 tri-state, API, admin, policies."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, SettingsError, flatten, merge
from resilience.admin.settings import field_name
from resilience.domain.breaker.machine import HINT_COOLDOWNS
from resilience.domain.classify.classifier import CooldownProfile
from resilience.domain.policies import breaker_policy_for, cooldown_profile_for
from resilience.domain.profiles import ProfileName
from resilience.domain.settings.document import (
    CONNECTION_COOLDOWN,
    CooldownSettings,
    resilience_settings_of,
)
from resilience.models import ResilienceSettings
from resilience.services import resilience_settings_document, resilience_settings_update
from routing.selectors import config_snapshot_build

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
CHANGE_URL = reverse("admin:resilience_resiliencesettings_change", args=[1])
OAUTH_429 = "connectionCooldown.oauth.useUpstream429BreakerHints"
DEFAULT_SECTION = {
    "oauth": {
        "baseCooldownMs": 5_000,
        "useUpstreamRetryHints": False,
        "maxBackoffSteps": 8,
        "useUpstream429BreakerHints": None,
    },
    "apikey": {
        "baseCooldownMs": 3_000,
        "useUpstreamRetryHints": True,
        "maxBackoffSteps": 5,
        "useUpstream429BreakerHints": None,
    },
}
# One valid non-default value per field.
CHANGES = [
    ("connectionCooldown.oauth.baseCooldownMs", 86_400_000),
    ("connectionCooldown.apikey.baseCooldownMs", 0),
    ("connectionCooldown.oauth.useUpstreamRetryHints", True),
    ("connectionCooldown.apikey.useUpstreamRetryHints", False),
    ("connectionCooldown.oauth.maxBackoffSteps", 32),
    ("connectionCooldown.apikey.maxBackoffSteps", 0),
    (OAUTH_429, True),
    ("connectionCooldown.apikey.useUpstream429BreakerHints", False),
]
OUT_OF_RANGE = [
    ("connectionCooldown.oauth.baseCooldownMs", -1, "must be between 0 and 86400000"),
    ("connectionCooldown.apikey.baseCooldownMs", 86_400_001, "must be between 0 and 86400000"),
    ("connectionCooldown.oauth.maxBackoffSteps", 33, "must be between 0 and 32"),
    ("connectionCooldown.apikey.maxBackoffSteps", -1, "must be between 0 and 32"),
    ("connectionCooldown.apikey.useUpstreamRetryHints", None, "must be a boolean"),
    (OAUTH_429, "true", "must be a boolean or null"),
    (OAUTH_429, 1, "must be a boolean or null"),
]


def _patch(path: str, value: Any) -> dict[str, Any]:
    *parents, leaf = path.split(".")
    node: dict[str, Any] = {leaf: value}
    for part in reversed(parents):
        node = {part: node}
    return node


def _stored() -> dict[str, Any] | None:
    row = ResilienceSettings.objects.filter(pk=1).first()
    return None if row is None else row.document


# --- pure: defaults, resolve, patch, merge ------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (ProfileName.OAUTH, CooldownSettings(5_000, False, 8, None)),
        (ProfileName.APIKEY, CooldownSettings(3_000, True, 5, None)),
        # no operator section: max(transient 2 000, rate-limit 5 000), hints off, 3 steps
        (ProfileName.LOCAL, CooldownSettings(5_000, False, 3, None)),
    ],
)
def test_defaults_per_profile(profile: ProfileName, expected: CooldownSettings) -> None:
    assert SETTINGS.resolve({}, NO_ENV)[CONNECTION_COOLDOWN][profile] == expected


def test_document_has_oauth_and_apikey_sections_only() -> None:
    assert SETTINGS.render(SETTINGS.resolve({}, NO_ENV))["connectionCooldown"] == DEFAULT_SECTION


def test_resolve_reads_stored_values_leniently() -> None:
    stored = {
        "connectionCooldown": {
            "oauth": {"baseCooldownMs": "12000", "maxBackoffSteps": 99},
            "apikey": {"useUpstreamRetryHints": "no", "useUpstream429BreakerHints": "yes"},
        }
    }
    settings = SETTINGS.resolve(stored, NO_ENV)

    assert settings[CONNECTION_COOLDOWN][ProfileName.OAUTH] == CooldownSettings(
        12_000, False, 32, None
    )
    assert settings[CONNECTION_COOLDOWN][ProfileName.APIKEY] == CooldownSettings(
        3_000, True, 5, None
    )


@pytest.mark.parametrize("stored", [True, False, None])
def test_resolve_keeps_the_tri_state(stored: bool | None) -> None:
    document = {"connectionCooldown": {"apikey": {"useUpstream429BreakerHints": stored}}}
    cooldown = SETTINGS.resolve(document, NO_ENV)[CONNECTION_COOLDOWN][ProfileName.APIKEY]
    assert cooldown.use_upstream_429_breaker_hints is stored


@pytest.mark.parametrize(("path", "value"), CHANGES)
def test_patch_accepts_each_field(path: str, value: Any) -> None:
    assert flatten(SETTINGS.validate_patch(_patch(path, value))) == {path: value}


@pytest.mark.parametrize(("path", "value", "message"), OUT_OF_RANGE)
def test_patch_rejects_bad_values_naming_the_field(path: str, value: Any, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        SETTINGS.validate_patch(_patch(path, value))
    assert raised.value.errors == {path: message}


def test_patch_rejects_a_local_section() -> None:
    with pytest.raises(SettingsError) as raised:
        SETTINGS.validate_patch({"connectionCooldown": {"local": {"baseCooldownMs": 1}}})
    assert raised.value.errors == {"connectionCooldown.local": "unknown key"}


@pytest.mark.parametrize(
    ("patch_value", "expected"),
    [(None, {}), (False, {"useUpstream429BreakerHints": False})],
)
def test_merge_null_clears_and_a_bool_replaces(patch_value: bool | None, expected: Any) -> None:
    stored = {"connectionCooldown": {"oauth": {"useUpstream429BreakerHints": True}}}
    merged = merge(stored, SETTINGS.validate_patch(_patch(OAUTH_429, patch_value)))
    assert merged == ({"connectionCooldown": {"oauth": expected}} if expected else {})


def test_merge_omitted_tri_state_is_kept() -> None:
    stored = {"connectionCooldown": {"oauth": {"useUpstream429BreakerHints": True}}}
    patch = SETTINGS.validate_patch(_patch("connectionCooldown.oauth.maxBackoffSteps", 2))
    assert merge(stored, patch)["connectionCooldown"]["oauth"] == {
        "useUpstream429BreakerHints": True,
        "maxBackoffSteps": 2,
    }


# --- policies -----------------------------------------------------------------------------------


def test_cooldown_profile_uses_the_operator_section() -> None:
    stored = {
        "connectionCooldown": {
            "oauth": {"baseCooldownMs": 7_000, "useUpstreamRetryHints": True},
            "apikey": {"maxBackoffSteps": 2},
        }
    }
    settings = resilience_settings_of(SETTINGS.resolve(stored, NO_ENV))

    oauth = cooldown_profile_for("oauth", settings, NO_ENV, 900_000)
    apikey = cooldown_profile_for("api_key", settings, NO_ENV, 1_800_000)

    assert oauth == CooldownProfile(7_000, True, 8, max_cooldown_ms=900_000, category="oauth")
    assert apikey == CooldownProfile(3_000, True, 2, max_cooldown_ms=1_800_000)


def test_local_and_unknown_categories() -> None:
    stored = {"connectionCooldown": {"apikey": {"baseCooldownMs": 1}}}
    settings = resilience_settings_of(SETTINGS.resolve(stored, NO_ENV))

    local = cooldown_profile_for("local", settings, NO_ENV, 1_800_000)
    unknown = cooldown_profile_for("byok", settings, NO_ENV, 1_800_000)

    assert local == CooldownProfile(5_000, False, 3, category="local")
    assert (unknown.base_cooldown_ms, unknown.category) == (1, "byok")  # the API-key profile


@pytest.mark.parametrize(
    ("stored", "expected"), [(None, {}), (False, {}), (True, dict(HINT_COOLDOWNS))]
)
def test_breaker_policy_follows_the_429_hint_tri_state(stored: bool | None, expected: Any) -> None:
    document = {"connectionCooldown": {"oauth": {"useUpstream429BreakerHints": stored}}}
    settings = resilience_settings_of(SETTINGS.resolve(document, NO_ENV))

    assert breaker_policy_for("oauth", settings, NO_ENV).cooldown_by_kind == expected
    assert breaker_policy_for("api_key", settings, NO_ENV).cooldown_by_kind == {}


@pytest.mark.django_db
def test_snapshot_carries_the_operator_values() -> None:
    resilience_settings_update(
        patch={"connectionCooldown": {"apikey": {"baseCooldownMs": 1_234, "maxBackoffSteps": 1}}}
    )
    resilience_settings_update(patch=_patch(OAUTH_429, True))

    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.cooldown_profile("openai").base_cooldown_ms == 1_234
    assert snapshot.cooldown_profile("openai").max_backoff_steps == 1
    assert snapshot.cooldown_profile("opencode-cli").base_cooldown_ms == 5_000
    assert snapshot.breaker_policy("opencode-cli").cooldown_by_kind == dict(HINT_COOLDOWNS)
    assert snapshot.breaker_policy("openai").cooldown_by_kind == {}


# --- API ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_get_shows_the_defaults_with_null_for_unset(manage_client: APIClient) -> None:
    assert manage_client.get(URL).json()["connectionCooldown"] == DEFAULT_SECTION


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "value"), CHANGES)
def test_patch_each_field(manage_client: APIClient, path: str, value: Any) -> None:
    response = manage_client.patch(URL, _patch(path, value), format="json")

    assert response.status_code == 200, response.content
    assert flatten(response.json())[path] == value
    assert flatten(manage_client.get(URL).json())[path] == value
    assert _stored() == _patch(path, value)


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "value", "message"), OUT_OF_RANGE)
def test_patch_out_of_range_is_400_naming_the_field(
    manage_client: APIClient, path: str, value: Any, message: str
) -> None:
    response = manage_client.patch(URL, _patch(path, value), format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["fields"] == {path: message}
    assert path in error["message"]
    assert _stored() is None


@pytest.mark.django_db
def test_tri_state_set_keep_and_clear(manage_client: APIClient) -> None:
    def hint() -> Any:
        return manage_client.get(URL).json()["connectionCooldown"]["oauth"][
            "useUpstream429BreakerHints"
        ]

    manage_client.patch(URL, _patch(OAUTH_429, True), format="json")
    assert hint() is True

    other = _patch("connectionCooldown.oauth.baseCooldownMs", 9_000)
    manage_client.patch(URL, other, format="json")  # omitted: kept
    assert hint() is True

    manage_client.patch(URL, _patch(OAUTH_429, False), format="json")
    assert hint() is False

    response = manage_client.patch(URL, _patch(OAUTH_429, None), format="json")  # null: unset
    assert response.status_code == 200
    assert hint() is None
    assert _stored() == other


@pytest.mark.django_db
def test_schema_documents_the_tri_state_as_nullable(manage_client: APIClient) -> None:
    schema = manage_client.get("/api/schema/", {"format": "json"}).json()
    patch = schema["paths"][URL]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    oauth = patch["properties"]["connectionCooldown"]["properties"]["oauth"]["properties"]
    assert oauth["useUpstream429BreakerHints"] == {"type": "boolean", "nullable": True}


# --- admin --------------------------------------------------------------------------------------


def _form(**changes: Any) -> dict[str, Any]:
    """The settings page as submitted: current values, with ``changes`` keyed by dotted path.

    Booleans post "on" or nothing; tri-states post the select's "true" / "false" / "unknown".
    """
    values = {**flatten(resilience_settings_document()), **changes}
    data: dict[str, Any] = {"_save": "Save"}
    for path, value in values.items():
        if path.endswith("useUpstream429BreakerHints"):
            data[field_name(path)] = {True: "true", False: "false", None: "unknown"}[value]
        elif value is True:
            data[field_name(path)] = "on"
        elif value is not False:
            data[field_name(path)] = value
    return data


@pytest.mark.django_db
def test_admin_page_shows_the_section(staff_client: Client) -> None:
    page = staff_client.get(CHANGE_URL).content.decode()

    for path in flatten({"connectionCooldown": DEFAULT_SECTION}):
        assert path in page
    assert "Unset (provider default)" in page
    assert 'name="connectionCooldown__apikey__baseCooldownMs" value="3000"' in page


@pytest.mark.django_db
def test_admin_saves_the_new_fields(staff_client: Client) -> None:
    form = _form(
        **{
            "connectionCooldown.apikey.baseCooldownMs": 4_000,
            "connectionCooldown.apikey.useUpstreamRetryHints": False,
            OAUTH_429: True,
        }
    )

    response = staff_client.post(CHANGE_URL, form)

    assert response.status_code == 302, response.content
    assert _stored() == {
        "connectionCooldown": {
            "apikey": {"baseCooldownMs": 4_000, "useUpstreamRetryHints": False},
            "oauth": {"useUpstream429BreakerHints": True},
        }
    }


@pytest.mark.django_db
def test_admin_unset_clears_the_tri_state(staff_client: Client) -> None:
    resilience_settings_update(patch=_patch(OAUTH_429, False))

    response = staff_client.post(CHANGE_URL, _form(**{OAUTH_429: None}))

    assert response.status_code == 302, response.content
    assert _stored() == {}
    assert (
        resilience_settings_document()["connectionCooldown"]["oauth"]["useUpstream429BreakerHints"]
        is None
    )


@pytest.mark.django_db
def test_admin_rejects_out_of_range_steps(staff_client: Client) -> None:
    path = "connectionCooldown.oauth.maxBackoffSteps"

    response = staff_client.post(CHANGE_URL, _form(**{path: 40}))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors == {field_name(path): ["must be between 0 and 32"]}
    assert _stored() is None
