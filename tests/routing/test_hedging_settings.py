"""Hedging's settings: the ``attempts`` keys with their defaults and
bounds in ``/api/resilience``, a combo's own values, and a catalog entry's hedge delay, each as
the configuration snapshot hands them to the attempt loop."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from resilience.services import resilience_settings_update
from routing.models import Combo, ModelCatalogEntry, Provider
from routing.selectors import config_snapshot_build
from routing.services import catalog_entry_save, combo_save
from tests.routing.api_support import error_fields

pytestmark = pytest.mark.django_db

SETTINGS_URL = "/api/resilience"
CATALOG_URL = "/api/model-catalog/"


def _snapshot() -> Any:
    return config_snapshot_build(version=1, remote_version=0)


def test_the_defaults_are_shown(manage_client: APIClient) -> None:
    attempts = manage_client.get(SETTINGS_URL).json()["attempts"]

    assert (attempts["hedgeEnabled"], attempts["hedgeAfterMs"], attempts["hedgeMaxPercent"]) == (
        True,
        10_000,
        10,
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hedgeAfterMs", -1, "must be between 0 and 600000"),
        ("hedgeAfterMs", 600_001, "must be between 0 and 600000"),
        ("hedgeMaxPercent", 101, "must be between 0 and 100"),
        ("hedgeMaxPercent", -1, "must be between 0 and 100"),
        ("hedgeEnabled", "yes", "must be a boolean"),
    ],
)
def test_the_bounds_are_enforced(
    manage_client: APIClient, key: str, value: Any, message: str
) -> None:
    response = manage_client.patch(SETTINGS_URL, {"attempts": {key: value}}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {f"attempts.{key}": message}


def test_a_patch_reaches_the_snapshot(manage_client: APIClient) -> None:
    patch = {"attempts": {"hedgeEnabled": False, "hedgeAfterMs": 0, "hedgeMaxPercent": 100}}

    response = manage_client.patch(SETTINGS_URL, patch, format="json")

    assert response.status_code == 200, response.content
    policy = _snapshot().attempts
    assert (policy.hedge_enabled, policy.hedge_after_ms, policy.hedge_max_percent) == (
        False,
        0,
        100,
    )


def test_a_combo_has_its_own_hedge_delay_and_share(manage_client: APIClient) -> None:
    overrides = {"hedgeAfterMs": 3_000, "hedgeMaxPercent": 50}
    body = {"name": "quick", "strategy": "priority", "attempt_overrides": overrides}
    created = manage_client.post("/api/combos/", body, format="json")
    assert created.status_code == 201, created.content
    combo_save(combo=Combo(), fields={"name": "off", "attempt_overrides": {"hedgeEnabled": False}})

    snapshot = _snapshot()

    quick, off = snapshot.attempt_policy("quick"), snapshot.attempt_policy("off")
    assert (quick.hedge_enabled, quick.hedge_after_ms, quick.hedge_max_percent) == (True, 3_000, 50)
    assert not off.hedge_enabled
    assert snapshot.attempt_policy(None).hedge_after_ms == 10_000


def test_a_combo_cannot_turn_hedging_back_on(db: None) -> None:
    resilience_settings_update(patch={"attempts": {"hedgeEnabled": False}})
    combo_save(combo=Combo(), fields={"name": "on", "attempt_overrides": {"hedgeEnabled": True}})

    assert not _snapshot().attempt_policy("on").hedge_enabled


def test_a_bad_combo_override_is_refused_naming_the_key(manage_client: APIClient) -> None:
    body = {"name": "bad", "strategy": "priority", "attempt_overrides": {"hedgeMaxPercent": 101}}

    response = manage_client.post("/api/combos/", body, format="json")

    assert "attempt_overrides" in error_fields(response)
    assert "hedgeMaxPercent" in response.content.decode()


def test_a_catalog_entry_sets_its_model_hedge_delay(
    manage_client: APIClient, provider: Provider
) -> None:
    body = {"provider": provider.slug, "model": "thinker", "hedge_after_ms": 4_000}

    created = manage_client.post(CATALOG_URL, body, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["hedge_after_ms"] == 4_000
    entry = _snapshot().catalog_entry(provider.slug, "thinker")
    assert entry is not None and entry.hedge_after_ms == 4_000


def test_a_catalog_entry_may_never_hedge_or_follow_the_settings(provider: Provider) -> None:
    fields = {"provider": provider, "model": "never", "hedge_after_ms": 0}
    catalog_entry_save(entry=ModelCatalogEntry(), fields=fields)
    catalog_entry_save(entry=ModelCatalogEntry(), fields={"provider": provider, "model": "plain"})

    snapshot = _snapshot()

    never, plain = snapshot.catalog_entry("mock", "never"), snapshot.catalog_entry("mock", "plain")
    assert never is not None and never.hedge_after_ms == 0
    assert plain is not None and plain.hedge_after_ms is None


def test_a_catalog_hedge_delay_above_the_bound_is_refused(
    manage_client: APIClient, provider: Provider
) -> None:
    body = {"provider": provider.slug, "model": "thinker", "hedge_after_ms": 600_001}

    response = manage_client.post(CATALOG_URL, body, format="json")

    assert "hedge_after_ms" in error_fields(response)
