"""``/api/feature-flags/``: the emergency-fallback override set, changed and cleared through the
API, through the admin's service (validated, and the configuration version moves)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from omniroute.core.config_version import config_local_version
from routing.models import FeatureFlag

pytestmark = pytest.mark.django_db

URL = "/api/feature-flags/"
FALLBACK = FeatureFlag.Name.EMERGENCY_FALLBACK.value


def test_set_change_and_clear_the_emergency_fallback(
    manage_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    before = config_local_version()
    with django_capture_on_commit_callbacks(execute=True):
        created = manage_client.post(
            URL, {"name": FALLBACK, "value": "openai=mock/gpt-4o-mini"}, format="json"
        )
    assert created.status_code == 201, created.content
    assert config_local_version() != before  # the snapshot is rebuilt: the flag takes effect

    changed = manage_client.patch(f"{URL}{FALLBACK}/", {"enabled": False}, format="json")
    listed = manage_client.get(URL).json()
    cleared = manage_client.delete(f"{URL}{FALLBACK}/")

    assert changed.json()["enabled"] is False
    assert [(f["name"], f["enabled"]) for f in listed["results"]] == [(FALLBACK, False)]
    assert cleared.status_code == 204
    assert not FeatureFlag.objects.exists()


def test_a_value_the_flag_cannot_parse_is_a_400(manage_client: APIClient) -> None:
    response = manage_client.post(URL, {"name": FALLBACK, "value": "nonsense"}, format="json")

    assert response.status_code == 400
    assert "value" in response.json()["error"]["fields"]
    assert not FeatureFlag.objects.exists()


def test_flags_filter_on_enabled(manage_client: APIClient) -> None:
    manage_client.post(URL, {"name": FALLBACK, "value": "", "enabled": False}, format="json")

    assert manage_client.get(URL, {"enabled": "true"}).json()["count"] == 0
    assert manage_client.get(URL, {"enabled": "false"}).json()["count"] == 1
