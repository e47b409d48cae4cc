"""``/api/resilience`` and the admin settings page: reads, strict writes, auth, snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.config_version import config_local_version
from omniroute.core.settings import SETTINGS, SettingsError, flatten
from resilience.admin.settings import field_name
from resilience.models import ResilienceSettings
from resilience.services import resilience_settings_document, resilience_settings_update

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_env")]

URL = "/api/resilience"
CHANGE_URL = reverse("admin:resilience_resiliencesettings_change", args=[1])
Capture = Callable[..., Any]


def _stored() -> dict[str, Any] | None:
    row = ResilienceSettings.objects.filter(pk=1).first()
    return None if row is None else row.document


def _error(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


# --- GET ---------------------------------------------------------------------------------------


def test_get_returns_the_full_resolved_document(manage_client: APIClient) -> None:
    response = manage_client.get(URL)

    assert response.status_code == 200
    document = response.json()
    assert set(flatten(document)) == set(SETTINGS.schema.fields)
    assert document["providerBreaker"]["apikey"] == {
        "failureThreshold": 12,
        "degradationThreshold": 7,
        "resetTimeoutMs": 30_000,
        "windowMs": 60_000,
        "minimumCalls": 10,
        "failureRatePercent": 50,
    }
    assert document["providerCooldown"] == {
        "enabled": False,
        "minRetryCooldownMs": 5_000,
        "maxRetryCooldownMs": 300_000,
    }
    assert _stored() is None  # reading never creates the row


def test_get_applies_env_overrides(
    manage_client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVIDER_COOLDOWN_ENABLED", "on")
    assert manage_client.get(URL).json()["providerCooldown"]["enabled"] is True


# --- PATCH -------------------------------------------------------------------------------------


def test_patch_persists_and_moves_the_snapshot_version(
    manage_client: APIClient, django_capture_on_commit_callbacks: Capture
) -> None:
    before = config_local_version()
    patch = {"providerBreaker": {"apikey": {"failureThreshold": 20}}}

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True
    assert body["providerBreaker"]["apikey"]["failureThreshold"] == 20
    assert body["providerBreaker"]["apikey"]["degradationThreshold"] == 7
    assert _stored() == patch  # only what the operator set
    assert len(callbacks) == 1
    assert config_local_version() != before
    assert manage_client.get(URL).json()["providerBreaker"]["apikey"]["failureThreshold"] == 20


def test_successive_patches_keep_earlier_fields(manage_client: APIClient) -> None:
    manage_client.patch(URL, {"providerCooldown": {"enabled": True}}, format="json")
    response = manage_client.patch(
        URL, {"providerCooldown": {"minRetryCooldownMs": 1_000}}, format="json"
    )

    assert response.json()["providerCooldown"] == {
        "enabled": True,
        "minRetryCooldownMs": 1_000,
        "maxRetryCooldownMs": 300_000,
    }
    assert _stored() == {"providerCooldown": {"enabled": True, "minRetryCooldownMs": 1_000}}


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        (
            {"providerBreaker": {"apikey": {"failureThreshold": 0}}},
            "providerBreaker.apikey.failureThreshold",
            "must be between 2 and 1000",
        ),
        (
            {"providerBreaker": {"oauth": {"degradationThreshold": 8}}},
            "providerBreaker.oauth.degradationThreshold",
            "must be less than failureThreshold (8)",
        ),
        (
            {"providerCooldown": {"maxRetryCooldownMs": 10}},
            "providerCooldown.maxRetryCooldownMs",
            "must be at least minRetryCooldownMs (5000)",
        ),
        ({"providerCooldown": {"enabled": "yes"}}, "providerCooldown.enabled", "must be a boolean"),
        ({"waitForCooldown": {}}, "waitForCooldown", "unknown section"),  # the wait is retired
        ([1, 2], "non_field_errors", "must be a JSON object"),
    ],
)
def test_patch_errors_name_the_field(
    manage_client: APIClient, patch: Any, field: str, message: str
) -> None:
    before = config_local_version()

    error = _error(manage_client.patch(URL, patch, format="json"))

    assert error["code"] == "invalid_settings"
    assert error["fields"][field] == message
    assert field in error["message"]
    assert _stored() is None
    assert config_local_version() == before


def test_patch_with_broken_json_is_400(manage_client: APIClient) -> None:
    response = manage_client.generic("PATCH", URL, "{nope", content_type="application/json")
    assert _error(response)["code"] == "invalid_request"


def test_service_rejects_like_the_api() -> None:
    with pytest.raises(SettingsError) as raised:
        resilience_settings_update(patch={"providerCooldown": {"enabled": 1}})
    assert raised.value.errors == {"providerCooldown.enabled": "must be a boolean"}
    assert _stored() is None


# --- auth and schema ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "patch"])
def test_anonymous_gets_401(api_client: APIClient, method: str) -> None:
    response = getattr(api_client, method)(URL, {}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("method", ["get", "patch"])
def test_key_without_manage_scope_gets_403(plain_client: APIClient, method: str) -> None:
    response = getattr(plain_client, method)(URL, {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_staff_session_can_read_and_patch(staff_client: Client) -> None:
    assert staff_client.get(URL).status_code == 200
    body = '{"providerCooldown": {"enabled": true}}'
    response = staff_client.patch(URL, body, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["ok"] is True


def test_schema_documents_the_endpoint(manage_client: APIClient) -> None:
    response = manage_client.get("/api/schema/", {"format": "json"})

    operations = response.json()["paths"]["/api/resilience"]
    assert set(operations) == {"get", "patch"}
    patch_schema = operations["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert patch_schema["additionalProperties"] is False
    assert "400" in operations["patch"]["responses"]


def test_schema_allows_the_400_of_a_body_that_is_not_json(manage_client: APIClient) -> None:
    # the schema once promised invalid_settings with fields, so broken JSON broke the schema
    broken = manage_client.generic("PATCH", URL, "\x00", content_type="application/json")
    schema = manage_client.get("/api/schema/", {"format": "json"}).json()
    answer = schema["paths"]["/api/resilience"]["patch"]["responses"]["400"]["content"]
    error = answer["application/json"]["schema"]["properties"]["error"]

    assert _error(broken)["code"] in error["properties"]["code"]["enum"]
    assert set(error["required"]) <= set(_error(broken))


# --- admin -------------------------------------------------------------------------------------


def _form(**changes: Any) -> dict[str, Any]:
    """The settings page as submitted: the defaults, with ``changes`` keyed by dotted path."""
    values: dict[str, Any] = {**flatten(resilience_settings_document()), **changes}
    data = {field_name(p): v for p, v in values.items() if not isinstance(v, bool | None)}
    data.update({field_name(p): "on" for p, v in values.items() if v is True})
    return {**data, "_save": "Save"}


def test_admin_changelist_redirects_to_the_single_page(staff_client: Client) -> None:
    response = staff_client.get(reverse("admin:resilience_resiliencesettings_changelist"))
    assert response.status_code == 302
    assert response["Location"] == CHANGE_URL


def test_admin_page_renders_every_setting(staff_client: Client) -> None:
    response = staff_client.get(CHANGE_URL)

    assert response.status_code == 200
    for path in SETTINGS.schema.fields:
        assert path in response.content.decode()
    assert _stored() is None
    assert staff_client.get(reverse("admin:resilience_resiliencesettings_add")).status_code == 403


def test_admin_valid_post_saves_only_the_changes(
    staff_client: Client, django_capture_on_commit_callbacks: Capture
) -> None:
    before = config_local_version()
    form = _form(
        **{"providerBreaker.oauth.resetTimeoutMs": 90_000, "providerCooldown.enabled": True}
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(CHANGE_URL, form)

    assert response.status_code == 302, response.content
    assert _stored() == {
        "providerBreaker": {"oauth": {"resetTimeoutMs": 90_000}},
        "providerCooldown": {"enabled": True},
    }
    assert config_local_version() != before
    assert any("changed successfully" in str(m) for m in get_messages(response.wsgi_request))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"providerBreaker.apikey.failureThreshold": 5_000}, "must be between 2 and 1000"),
        ({"providerBreaker.apikey.degradationThreshold": 12}, "must be less than failureThreshold"),
        ({"providerCooldown.minRetryCooldownMs": 400_000}, "must not exceed maxRetryCooldownMs"),
    ],
)
def test_admin_invalid_post_shows_the_error_and_saves_nothing(
    staff_client: Client, changes: dict[str, Any], message: str
) -> None:
    response = staff_client.post(CHANGE_URL, _form(**changes))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field_name(next(iter(changes)))]
    assert message in errors[field_name(next(iter(changes)))][0]
    assert _stored() is None
