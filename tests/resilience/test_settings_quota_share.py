"""The ``quotaShareConcurrencyLimit`` section of the settings document:
default, lenient resolve, strict patches through the API."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from routing.domain.settings.quota_share import QuotaShareSettings
from routing.domain.settings.sections import QUOTA_SHARE

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
SECTION = "quotaShareConcurrencyLimit"


def test_on_by_default() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)

    assert settings[QUOTA_SHARE] == QuotaShareSettings(enabled=True) == QuotaShareSettings()
    assert SETTINGS.render(settings)[SECTION] == {"enabled": True}


def test_a_document_without_the_section_gets_its_defaults() -> None:
    resolved = SETTINGS.resolve({"modelLockout": {"maxBackoffSteps": 3}}, NO_ENV)
    assert resolved[QUOTA_SHARE] == QuotaShareSettings()


def test_a_stored_false_turns_it_off() -> None:
    settings = SETTINGS.resolve({SECTION: {"enabled": False}}, NO_ENV)

    assert settings[QUOTA_SHARE].enabled is False
    assert SETTINGS.render(settings)[SECTION] == {"enabled": False}


@pytest.mark.parametrize("garbage", ["false", 0, None, [], "off"])
def test_stored_garbage_keeps_the_default(garbage: Any) -> None:
    assert SETTINGS.resolve({SECTION: {"enabled": garbage}}, NO_ENV)[QUOTA_SHARE].enabled is True


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        ({"enabled": "no"}, f"{SECTION}.enabled", "must be a boolean"),
        ({"enabled": 0}, f"{SECTION}.enabled", "must be a boolean"),
        ({"enabled": None}, f"{SECTION}.enabled", "must be a boolean"),
        ({"limit": 2}, f"{SECTION}.limit", "unknown key"),
        (False, SECTION, "must be an object"),
    ],
)
def test_the_api_rejects_a_bad_value(
    manage_client: APIClient, section: Any, field: str, message: str
) -> None:
    response = manage_client.patch(URL, {SECTION: section}, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_settings")
    assert error["fields"] == {field: message}
    assert not ResilienceSettingsRow.objects.exists()


@pytest.mark.django_db
def test_a_patch_round_trips_through_get(manage_client: APIClient) -> None:
    response = manage_client.patch(URL, {SECTION: {"enabled": False}}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()[SECTION] == {"enabled": False}
    assert ResilienceSettingsRow.objects.get().document == {SECTION: {"enabled": False}}
    assert manage_client.get(URL).json()[SECTION] == {"enabled": False}
