"""``availability.transientCooldownBaseMs``: the first self-set timer, 2 000 ms
by default, 100 to 60 000, never above ``availability.transientCooldownCapMs``; in the API and
the admin like its siblings."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, flatten
from resilience.admin.settings import field_name
from resilience.domain.settings.document import AVAILABILITY
from resilience.models import ResilienceSettings
from resilience.services import resilience_settings_document

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_env")]

URL = "/api/resilience"
PAGE = reverse("admin:resilience_resiliencesettings_change", args=[1])
BASE = "availability.transientCooldownBaseMs"
CAP = "availability.transientCooldownCapMs"


def _patch(client: APIClient, availability: dict[str, Any]) -> Any:
    return client.patch(URL, {"availability": availability}, format="json")


def _stored() -> dict[str, Any] | None:
    row = ResilienceSettings.objects.filter(pk=1).first()
    return None if row is None else row.document


def test_get_shows_the_default_base(manage_client: APIClient) -> None:
    response = manage_client.get(URL)

    assert response.status_code == 200
    availability = response.json()["availability"]
    assert (availability["transientCooldownBaseMs"], availability["transientCooldownCapMs"]) == (
        2_000,
        30_000,
    )
    assert SETTINGS.resolve({}, {})[AVAILABILITY].transient_cooldown_base_ms == 2_000


@pytest.mark.parametrize("value", [100, 30_000])
def test_patch_sets_a_base_within_the_bounds_and_the_cap(
    manage_client: APIClient, value: int
) -> None:
    response = _patch(manage_client, {"transientCooldownBaseMs": value})

    assert response.status_code == 200, response.content
    assert response.json()["availability"]["transientCooldownBaseMs"] == value
    assert _stored() == {"availability": {"transientCooldownBaseMs": value}}


@pytest.mark.parametrize("value", [99, 60_001, 0, "2000", 2.5, None])
def test_patch_refuses_a_base_out_of_bounds(manage_client: APIClient, value: Any) -> None:
    response = _patch(manage_client, {"transientCooldownBaseMs": value})

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert list(fields) == [BASE]
    assert fields[BASE] in ("must be between 100 and 60000", "must be an integer")
    assert _stored() is None


@pytest.mark.parametrize(
    ("availability", "field", "message"),
    [
        # a base above the (default) cap
        ({"transientCooldownBaseMs": 45_000}, BASE, "must not exceed transientCooldownCapMs"),
        # both in one patch
        (
            {"transientCooldownBaseMs": 10_000, "transientCooldownCapMs": 5_000},
            BASE,
            "must not exceed transientCooldownCapMs (5000)",
        ),
        # a cap below the (default) base
        ({"transientCooldownCapMs": 1_500}, CAP, "must be at least transientCooldownBaseMs"),
    ],
)
def test_patch_refuses_a_base_above_the_cap_naming_both(
    manage_client: APIClient, availability: dict[str, Any], field: str, message: str
) -> None:
    response = _patch(manage_client, availability)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_settings"
    assert message in error["fields"][field]
    assert "transientCooldownBaseMs" in error["message"]
    assert "transientCooldownCapMs" in error["message"]
    assert _stored() is None


def test_a_cap_at_the_base_is_accepted(manage_client: APIClient) -> None:
    response = _patch(
        manage_client, {"transientCooldownBaseMs": 1_000, "transientCooldownCapMs": 1_000}
    )

    assert response.status_code == 200, response.content
    assert resilience_settings_document()["availability"]["transientCooldownCapMs"] == 1_000


def test_a_stored_cap_below_the_default_base_lowers_the_base() -> None:
    # a cap the operator stored before the base existed: kept, and the base follows it
    settings = SETTINGS.resolve({"availability": {"transientCooldownCapMs": 1_000}}, {})

    availability = SETTINGS.render(settings)["availability"]
    assert (availability["transientCooldownBaseMs"], availability["transientCooldownCapMs"]) == (
        1_000,
        1_000,
    )


def test_the_admin_page_shows_and_checks_the_base(staff_client: Client) -> None:
    page = staff_client.get(PAGE)
    field = page.context["adminform"].form.fields[field_name(BASE)]
    assert field.label == "First rest after short failures (ms)"
    assert "Allowed: from 100 to 60,000. API name: availability.transientCooldownBaseMs." in (
        field.help_text
    )

    values = {**flatten(resilience_settings_document()), BASE: 40_000}
    response = staff_client.post(PAGE, _form(values))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "must not exceed transientCooldownCapMs" in errors[field_name(BASE)][0]
    assert _stored() is None


def _form(values: dict[str, Any]) -> dict[str, Any]:
    """The settings page as submitted, keyed by dotted path."""
    data = {field_name(p): v for p, v in values.items() if not isinstance(v, bool | None)}
    data.update({field_name(p): "on" for p, v in values.items() if v is True})
    return {**data, "_save": "Save"}
