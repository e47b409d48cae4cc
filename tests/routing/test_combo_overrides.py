"""A combo's own attempt settings: validated on every write path (service, API, admin), and
applied over the global policy in the configuration snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from resilience.domain.attempts.policy import AttemptPolicy
from resilience.services import resilience_settings_update
from routing.models import Combo, Provider
from routing.selectors import config_snapshot_build
from routing.services import combo_save
from tests.routing.api_support import error_fields

pytestmark = pytest.mark.django_db


def _combo(name: str = "team", **fields: Any) -> Combo:
    return combo_save(combo=Combo(), fields={"name": name, **fields})


# --- model and service ------------------------------------------------------------------------


def test_a_combo_has_no_overrides_by_default(db: None) -> None:
    combo = _combo()

    combo.refresh_from_db()
    assert combo.attempt_overrides == {}


def test_valid_overrides_are_stored_as_integers(db: None) -> None:
    combo = _combo(attempt_overrides={"retriesPerTarget": 0, "deadlineMs": 60_000.0})

    combo.refresh_from_db()
    assert combo.attempt_overrides == {"retriesPerTarget": 0, "deadlineMs": 60_000}
    assert isinstance(combo.attempt_overrides["deadlineMs"], int)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retriesPerTarget": 6}, "retriesPerTarget: must be between 0 and 5"),
        ({"backoffBaseMs": True}, "backoffBaseMs: must be an integer"),
        ({"retries": 1}, "retries: unknown key"),
        (["retriesPerTarget"], "must be a JSON object"),
    ],
)
def test_invalid_overrides_are_refused_naming_the_key(overrides: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _combo(attempt_overrides=overrides)

    (error,) = caught.value.message_dict["attempt_overrides"]
    assert error.startswith(message)
    assert not Combo.objects.exists()


# --- API --------------------------------------------------------------------------------------


def test_api_accepts_and_returns_overrides(manage_client: APIClient) -> None:
    payload = {"name": "team", "attempt_overrides": {"retriesPerTarget": 0}}

    created = manage_client.post("/api/combos/", payload, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["attempt_overrides"] == {"retriesPerTarget": 0}
    url = f"/api/combos/{created.json()['id']}/"
    patched = manage_client.patch(url, {"attempt_overrides": {"deadlineMs": 5000}}, format="json")
    assert patched.json()["attempt_overrides"] == {"deadlineMs": 5000}
    assert Combo.objects.get().attempt_overrides == {"deadlineMs": 5000}
    assert manage_client.get(url).json()["attempt_overrides"] == {"deadlineMs": 5000}


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"maxRetryAfterWaitMs": 60_001}, "maxRetryAfterWaitMs: must be between 0 and 60000"),
        ({"retriesPerTarget": "2"}, "retriesPerTarget: must be an integer"),
        ({"timeout": 5}, "timeout: unknown key"),
    ],
)
def test_api_bad_overrides_are_400_naming_the_key(
    manage_client: APIClient, overrides: dict[str, Any], named: str
) -> None:
    payload = {"name": "team", "attempt_overrides": overrides}

    response = manage_client.post("/api/combos/", payload, format="json")

    (message,) = error_fields(response)["attempt_overrides"]
    assert message.startswith(named)
    assert not Combo.objects.exists()


# --- admin ------------------------------------------------------------------------------------


def _admin_form(overrides: str) -> dict[str, Any]:
    return {
        "name": "fast",
        "strategy": "priority",
        "is_active": "on",
        "description": "",
        "attempt_overrides": overrides,
        "targets-TOTAL_FORMS": "1",
        "targets-INITIAL_FORMS": "0",
        "targets-MIN_NUM_FORMS": "0",
        "targets-MAX_NUM_FORMS": "1000",
        "targets-0-position": "0",
        "targets-0-provider": "mock",
        "targets-0-model": "m",
        "targets-0-weight": "1",
    }


def test_admin_shows_the_keys_and_saves_overrides(staff_client: Client, provider: Provider) -> None:
    page = staff_client.get(reverse("admin:routing_combo_add")).content.decode()
    assert "retriesPerTarget (0–5)" in page

    response = staff_client.post(
        reverse("admin:routing_combo_add"), _admin_form('{"retriesPerTarget": 0}')
    )

    assert response.status_code == 302, response.content
    combo = Combo.objects.get(name="fast")
    assert combo.attempt_overrides == {"retriesPerTarget": 0}
    change = staff_client.get(reverse("admin:routing_combo_change", args=[combo.pk]))
    assert "retriesPerTarget" in change.content.decode()


def test_admin_blank_overrides_mean_none(staff_client: Client, provider: Provider) -> None:
    response = staff_client.post(reverse("admin:routing_combo_add"), _admin_form(""))

    assert response.status_code == 302, response.content
    assert Combo.objects.get(name="fast").attempt_overrides == {}


def test_admin_bad_override_is_a_form_error_naming_the_key(
    staff_client: Client, provider: Provider
) -> None:
    response = staff_client.post(
        reverse("admin:routing_combo_add"), _admin_form('{"backoffBaseMs": 10001}')
    )

    assert response.status_code == 200
    assert "backoffBaseMs: must be between 0 and 10000" in response.content.decode()
    assert not Combo.objects.exists()


# --- the snapshot -----------------------------------------------------------------------------

GLOBAL = {"attempts": {"retriesPerTarget": 2, "backoffBaseMs": 100, "deadlineMs": 90_000}}


def test_the_snapshot_applies_a_combo_overrides_over_the_global_policy(db: None) -> None:
    resilience_settings_update(patch=GLOBAL)
    _combo("careful", attempt_overrides={"retriesPerTarget": 0, "deadlineMs": 20_000})
    _combo("plain")

    snapshot = config_snapshot_build(version=1, remote_version=0)

    global_policy = AttemptPolicy(
        retries_per_target=2, backoff_base_ms=100, max_retry_after_wait_ms=5_000, deadline_ms=90_000
    )
    assert snapshot.attempts == global_policy
    assert snapshot.combos["careful"].attempts == AttemptPolicy(
        retries_per_target=0, backoff_base_ms=100, max_retry_after_wait_ms=5_000, deadline_ms=20_000
    )
    assert snapshot.combos["plain"].attempts is None
    assert snapshot.attempt_policy("careful") == snapshot.combos["careful"].attempts
    assert snapshot.attempt_policy("plain") == global_policy
    assert snapshot.attempt_policy(None) == global_policy
    assert snapshot.attempt_policy("no-such-combo") == global_policy


def test_a_stale_stored_override_never_breaks_the_snapshot(db: None) -> None:
    combo = _combo("careful")
    # Written behind the service's back, as a key later removed from the settings would be.
    Combo.objects.filter(pk=combo.pk).update(
        attempt_overrides={"retriesPerTarget": 99, "removedKey": 1}
    )

    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.attempt_policy("careful").retries_per_target == 5  # clamped to its bound
