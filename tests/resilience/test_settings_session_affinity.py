"""The ``sessionAffinity`` section of the settings document: off by
default, lenient resolve, strict patches through the API, and its help text on the admin page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS
from resilience.admin.settings import field_name
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from routing.domain.settings.sections import SESSION_AFFINITY
from routing.domain.settings.session_affinity import TTL_HELP, SessionAffinitySettings

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
SECTION = "sessionAffinity"
PATH = "sessionAffinity.ttlMs"
DAY_MS = 86_400_000


def test_off_by_default() -> None:
    settings = SETTINGS.resolve({}, NO_ENV)

    assert settings[SESSION_AFFINITY] == SessionAffinitySettings(ttl_ms=0)
    assert not settings[SESSION_AFFINITY].enabled
    assert SETTINGS.render(settings)[SECTION] == {"ttlMs": 0}


def test_a_stored_ttl_turns_it_on() -> None:
    settings = SETTINGS.resolve({SECTION: {"ttlMs": 1_800_000}}, NO_ENV)

    assert settings[SESSION_AFFINITY].enabled
    assert settings[SESSION_AFFINITY].ttl_seconds == 1_800.0
    assert SETTINGS.render(settings)[SECTION] == {"ttlMs": 1_800_000}


@pytest.mark.parametrize(
    ("stored", "resolved"),
    [("60000", 60_000), (-5, 0), (DAY_MS * 2, DAY_MS), (None, 0), ("soon", 0), (True, 0)],
)
def test_stored_values_are_read_leniently(stored: Any, resolved: int) -> None:
    settings = SETTINGS.resolve({SECTION: {"ttlMs": stored}}, NO_ENV)

    assert settings[SESSION_AFFINITY].ttl_ms == resolved


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        ({"ttlMs": -1}, PATH, f"must be between 0 and {DAY_MS}"),
        ({"ttlMs": DAY_MS + 1}, PATH, f"must be between 0 and {DAY_MS}"),
        ({"ttlMs": "60000"}, PATH, "must be an integer"),
        ({"ttlMs": None}, PATH, "must be an integer"),
        ({"ttl": 5}, f"{SECTION}.ttl", "unknown key"),
        (60_000, SECTION, "must be an object"),
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
    response = manage_client.patch(URL, {SECTION: {"ttlMs": 600_000}}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()[SECTION] == {"ttlMs": 600_000}
    assert ResilienceSettingsRow.objects.get().document == {SECTION: {"ttlMs": 600_000}}
    assert manage_client.get(URL).json()[SECTION] == {"ttlMs": 600_000}


@pytest.mark.django_db
def test_the_admin_page_explains_the_ttl_in_words(staff_client: Client) -> None:
    response = staff_client.get(reverse("admin:resilience_resiliencesettings_change", args=[1]))

    assert response.status_code == 200
    field = response.context["adminform"].form.fields[field_name(PATH)]
    assert field.help_text == f"{TTL_HELP} Allowed: from 0 to 86,400,000. API name: {PATH}."
    assert "0 turns session affinity off" in response.content.decode()
