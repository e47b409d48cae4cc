"""Nested combo steps, quota-only fallback steps, strategy options and catalog capabilities on
every write path (model, API, admin) and in the configuration snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection as db_connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from routing.domain.config.combo_options import ComboOptions
from routing.domain.config.snapshot import ComboStep
from routing.models import Combo, ModelCatalogEntry, Provider
from routing.selectors import config_snapshot_build
from routing.services import catalog_entry_save, combo_save
from tests.routing.api_support import error_fields

pytestmark = pytest.mark.django_db


def _combo(name: str, targets: list[dict[str, Any]] | None = None, **fields: Any) -> Combo:
    return combo_save(combo=Combo(), fields={"name": name, **fields}, targets=targets)


# --- model and service ------------------------------------------------------------------------


def test_options_are_validated_against_the_strategy_and_stored_normalised(db: None) -> None:
    combo = _combo("team", strategy="round-robin", options={"stickyRoundRobinLimit": 4.0})

    combo.refresh_from_db()
    assert combo.options == {"stickyRoundRobinLimit": 4}
    with pytest.raises(ValidationError) as caught:
        _combo("other", strategy="priority", options={"stickyRoundRobinLimit": 4})
    assert caught.value.message_dict["options"] == [
        "stickyRoundRobinLimit: an option of the round-robin strategy, not of priority"
    ]


def test_options_and_overrides_errors_come_together(db: None) -> None:
    with pytest.raises(ValidationError) as caught:
        _combo("team", options={"x": 1}, attempt_overrides={"retries": 1})

    assert set(caught.value.message_dict) == {"options", "attempt_overrides"}


def test_blank_options_mean_none(db: None) -> None:
    assert _combo("team", options=None).options == {}


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"model": "m"}, "__all__"),  # neither a provider nor a nested combo
        ({"provider": "PROVIDER", "model": "m", "combo_ref": "INNER"}, "combo_ref"),
        ({"combo_ref": "INNER", "model": "m"}, "combo_ref"),
        ({"provider": "PROVIDER"}, "model"),
        ({"combo_ref": "SELF"}, "combo_ref"),
    ],
)
def test_a_target_is_a_provider_model_or_a_nested_combo(
    provider: Provider, target: dict[str, Any], field: str
) -> None:
    inner = _combo("inner", [{"provider": provider, "model": "m"}])
    outer = _combo("outer")
    stand_ins = {"PROVIDER": provider, "INNER": inner, "SELF": outer}
    data = {name: stand_ins.get(value, value) for name, value in target.items()}

    with pytest.raises(ValidationError) as caught:
        combo_save(combo=outer, targets=[data])

    assert field in caught.value.message_dict
    assert not outer.targets.exists()


def test_a_referenced_combo_cannot_be_deleted_through_the_api(
    manage_client: APIClient, provider: Provider
) -> None:
    inner = _combo("inner", [{"provider": provider, "model": "m"}])
    _combo("outer", [{"combo_ref": inner}])

    response = manage_client.delete(f"/api/combos/{inner.pk}/")

    assert response.status_code == 409
    assert Combo.objects.filter(name="inner").exists()


# --- API --------------------------------------------------------------------------------------


def _payload(**fields: Any) -> dict[str, Any]:
    targets = [
        {"combo_ref": "inner", "weight": 3},
        {"provider": "mock", "model": "gpt-4*", "fallback_only_on_quota_exhaustion": True},
    ]
    return {"name": "outer", "strategy": "weighted", "targets": targets, **fields}


def test_api_round_trips_options_nested_combos_and_fallback_flags(
    manage_client: APIClient, provider: Provider
) -> None:
    _combo("inner", [{"provider": provider, "model": "m"}])
    options = {"stickyWeightedLimit": 5.0, "compatFilterFailOpen": True}

    created = manage_client.post("/api/combos/", _payload(options=options), format="json")

    assert created.status_code == 201, created.content
    url = f"/api/combos/{created.json()['id']}/"
    shown = manage_client.get(url).json()
    assert shown["options"] == {"stickyWeightedLimit": 5, "compatFilterFailOpen": True}
    assert [
        (
            t["combo_ref"],
            t["provider"],
            t["model"],
            t["weight"],
            t["fallback_only_on_quota_exhaustion"],
        )
        for t in shown["targets"]
    ] == [
        ("inner", None, "", 3, False),
        (None, "mock", "gpt-4*", 1, True),
    ]
    patched = manage_client.patch(url, {"options": {"stickyWeightedLimit": 2}}, format="json")
    assert patched.json()["options"] == {"stickyWeightedLimit": 2}
    assert Combo.objects.get(name="outer").options == {"stickyWeightedLimit": 2}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"stickyWeightedLimit": 0}, "stickyWeightedLimit: must be between 1 and 1000"),
        ({"minPanel": 2}, "minPanel: an option of the fusion strategy, not of weighted"),
        ({"sticky": 1}, "sticky: unknown key"),
        (["x"], "must be a JSON object"),
    ],
)
def test_api_bad_options_are_400_naming_the_key(
    manage_client: APIClient, provider: Provider, options: Any, named: str
) -> None:
    _combo("inner", [{"provider": provider, "model": "m"}])

    response = manage_client.post("/api/combos/", _payload(options=options), format="json")

    (message,) = error_fields(response)["options"]
    assert message.startswith(named)
    assert not Combo.objects.filter(name="outer").exists()


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"combo_ref": "no-such-combo"}, "combo_ref"),
        ({"combo_ref": "inner", "provider": "mock", "model": "m"}, "combo_ref"),
        ({"model": "m"}, "provider"),
        ({"provider": "mock"}, "model"),
    ],
)
def test_api_bad_targets_are_400_naming_the_field(
    manage_client: APIClient, provider: Provider, target: dict[str, Any], field: str
) -> None:
    _combo("inner", [{"provider": provider, "model": "m"}])

    response = manage_client.post(
        "/api/combos/", {"name": "outer", "targets": [target]}, format="json"
    )

    assert field in error_fields(response)["targets"]["0"]  # nested errors keyed by index


def test_api_refuses_a_combo_containing_itself(
    manage_client: APIClient, provider: Provider
) -> None:
    combo = _combo("loop", [{"provider": provider, "model": "m"}])

    response = manage_client.put(
        f"/api/combos/{combo.pk}/",
        {"name": "loop", "targets": [{"combo_ref": "loop"}]},
        format="json",
    )

    assert error_fields(response)["combo_ref"] == ["A combo cannot contain itself."]
    assert [t.model for t in Combo.objects.get(name="loop").targets.all()] == ["m"]


def test_api_lists_nested_combos_without_n_plus_one(
    manage_client: APIClient, provider: Provider
) -> None:
    def add(index: int) -> None:
        inner = _combo(f"inner{index}", [{"provider": provider, "model": "m"}])
        _combo(f"outer{index}", [{"combo_ref": inner}, {"combo_ref": inner}])

    add(0)
    with CaptureQueriesContext(db_connection) as few:
        manage_client.get("/api/combos/")
    for index in range(1, 4):
        add(index)
    with CaptureQueriesContext(db_connection) as many:
        assert len(manage_client.get("/api/combos/").json()["results"]) == 8

    assert len(many) == len(few)


def test_api_round_trips_catalog_capabilities(manage_client: APIClient, provider: Provider) -> None:
    payload = {"provider": "mock", "model": "tool-less", "supports_tools": False}

    created = manage_client.post("/api/model-catalog/", payload, format="json")

    assert created.status_code == 201, created.content
    assert (created.json()["supports_tools"], created.json()["supports_structured_output"]) == (
        False,
        None,
    )
    entry = ModelCatalogEntry.objects.get(provider="mock", model="tool-less")
    assert (entry.supports_tools, entry.supports_structured_output) == (False, None)


# --- the snapshot -----------------------------------------------------------------------------


def test_the_snapshot_carries_steps_options_and_capabilities(provider: Provider) -> None:
    inner = _combo("inner", [{"provider": provider, "model": "m"}])
    quota_only = {"provider": provider, "model": "b*", "fallback_only_on_quota_exhaustion": True}
    targets = [{"combo_ref": inner, "weight": 2}, quota_only]
    _combo("outer", targets, strategy="round-robin", options={"memberConcurrency": 2})
    entry = ModelCatalogEntry(provider=provider, model="tooled")
    catalog_entry_save(entry=entry, fields={"supports_tools": True, "context_window": 10})

    snapshot = config_snapshot_build(version=1, remote_version=0)

    outer = snapshot.combos["outer"]
    assert outer.steps == (
        ComboStep("", "", weight=2, combo_ref="inner"),
        ComboStep("mock", "b*", fallback_only_on_quota_exhaustion=True),
    )
    assert outer.options == ComboOptions(member_concurrency=2)
    assert snapshot.combos["inner"].options == ComboOptions()
    known = snapshot.catalog_entry("mock", "tooled")
    assert known is not None
    assert (known.supports_tools, known.supports_structured_output) == (True, None)


def test_building_the_snapshot_does_not_query_per_combo(provider: Provider) -> None:
    def add(index: int) -> None:
        inner = _combo(f"inner{index}", [{"provider": provider, "model": "m"}])
        _combo(f"outer{index}", [{"combo_ref": inner}, {"provider": provider, "model": "x"}])

    add(0)
    with CaptureQueriesContext(db_connection) as few:
        config_snapshot_build(version=1, remote_version=0)
    for index in range(1, 4):
        add(index)
    with CaptureQueriesContext(db_connection) as many:
        assert len(config_snapshot_build(version=1, remote_version=0).combos) == 8

    assert len(many) == len(few)


# --- admin ------------------------------------------------------------------------------------


def _admin_form(strategy: str, options: str, **target: str) -> dict[str, Any]:
    return {
        "name": "outer",
        "strategy": strategy,
        "is_active": "on",
        "description": "",
        "attempt_overrides": "",
        "options": options,
        "targets-TOTAL_FORMS": "1",
        "targets-INITIAL_FORMS": "0",
        "targets-MIN_NUM_FORMS": "0",
        "targets-MAX_NUM_FORMS": "1000",
        "targets-0-position": "0",
        "targets-0-weight": "1",
        **{f"targets-0-{name}": value for name, value in target.items()},
    }


def test_admin_add_page_lists_every_strategy_s_keys(staff_client: Client) -> None:
    page = staff_client.get(reverse("admin:routing_combo_add")).content.decode()

    assert "compatFilterFailOpen (true|false; default false)" in page
    assert "round-robin: stickyRoundRobinLimit (1–1000; default 1)" in page
    assert "fusion: judgeModel" in page


def test_admin_change_page_lists_the_chosen_strategy_s_keys(
    staff_client: Client, provider: Provider
) -> None:
    combo = _combo("team", [{"provider": provider, "model": "m"}], strategy="round-robin")

    page = staff_client.get(reverse("admin:routing_combo_change", args=[combo.pk]))

    text = page.content.decode()
    assert "Keys of round-robin: compatFilterFailOpen" in text
    assert "memberConcurrency (0–1000; default 0)" in text
    assert "stickyWeightedLimit" not in text
    assert "fallback_only_on_quota_exhaustion" in text and "combo_ref" in text


def test_admin_saves_options_and_a_nested_combo_step(
    staff_client: Client, provider: Provider
) -> None:
    inner = _combo("inner", [{"provider": provider, "model": "m"}])
    form = _admin_form(
        "weighted",
        '{"stickyWeightedLimit": 3}',
        combo_ref=str(inner.pk),
        fallback_only_on_quota_exhaustion="on",
    )

    response = staff_client.post(reverse("admin:routing_combo_add"), form)

    assert response.status_code == 302, response.content
    outer = Combo.objects.get(name="outer")
    assert outer.options == {"stickyWeightedLimit": 3}
    (target,) = outer.targets.all()
    assert (target.combo_ref_id, target.provider_id, target.fallback_only_on_quota_exhaustion) == (
        inner.pk,
        None,
        True,
    )


def test_admin_bad_options_are_a_form_error_naming_the_key(
    staff_client: Client, provider: Provider
) -> None:
    form = _admin_form("priority", '{"stickyWeightedLimit": 3}', provider="mock", model="m")

    response = staff_client.post(reverse("admin:routing_combo_add"), form)

    assert response.status_code == 200
    assert "stickyWeightedLimit: an option of the weighted strategy" in response.content.decode()
    assert not Combo.objects.filter(name="outer").exists()
