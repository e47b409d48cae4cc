"""The management API over HTTP for combos (CRUD with nested targets, validation), and the
API as a whole: the OpenAI schema generates and list endpoints make no N+1 queries.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from routing.models import Combo, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save
from tests.routing.api_support import error_fields

pytestmark = pytest.mark.django_db


# --- combos -----------------------------------------------------------------------------------


def _combo_payload(connection: ProviderConnection, **overrides: Any) -> dict[str, Any]:
    targets = [
        {"provider": "mock", "model": "fast", "connection": connection.pk, "weight": 2},
        {"provider": "openai", "model": "gpt-4o-mini"},
    ]
    return {"name": "team/chat", "strategy": "priority", "targets": targets, **overrides}


def test_combo_crud_with_nested_targets(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    created = manage_client.post("/api/combos/", _combo_payload(connection), format="json")
    assert created.status_code == 201, created.content
    url = f"/api/combos/{created.json()['id']}/"
    targets = manage_client.get(url).json()["targets"]
    assert [(t["position"], t["provider"], t["connection"]) for t in targets] == [
        (0, "mock", connection.pk),
        (1, "openai", None),
    ]

    patched = manage_client.patch(url, {"description": "kept targets"}, format="json").json()
    assert len(patched["targets"]) == 2
    replaced = manage_client.put(
        url,
        _combo_payload(connection, targets=[{"provider": "mock", "model": "slow"}]),
        format="json",
    ).json()
    assert [t["model"] for t in replaced["targets"]] == ["slow"]
    assert [
        c["name"] for c in manage_client.get("/api/combos/?name=team/chat").json()["results"]
    ] == ["team/chat"]

    assert manage_client.delete(url).status_code == 204
    assert not Combo.objects.exists()


@pytest.mark.parametrize("strategy", ["no-such-strategy", ""])
def test_combo_unknown_strategy_is_400(
    manage_client: APIClient, connection: ProviderConnection, strategy: str
) -> None:
    response = manage_client.post(
        "/api/combos/", _combo_payload(connection, strategy=strategy), format="json"
    )
    assert "strategy" in error_fields(response)
    assert not Combo.objects.exists()


def test_combo_pinned_connection_of_another_provider_is_400(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    targets = [{"provider": "openai", "model": "gpt-4o", "connection": connection.pk}]

    response = manage_client.post(
        "/api/combos/", {"name": "bad", "targets": targets}, format="json"
    )

    fields = error_fields(response)
    assert "connection" in fields["targets"]["0"]  # DRF keys nested list errors by index
    assert not Combo.objects.exists()


def test_combo_missing_name_is_400(manage_client: APIClient) -> None:
    assert "name" in error_fields(manage_client.post("/api/combos/", {}, format="json"))


# --- schema -----------------------------------------------------------------------------------


def test_schema_generates(manage_client: APIClient) -> None:
    response = manage_client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/connections/" in response.content
    assert b"clientKeyBearer" in response.content


@pytest.mark.parametrize("resource", ["connections", "keys", "combos"])
def test_lists_have_no_n_plus_one(
    manage_client: APIClient, connection: ProviderConnection, resource: str
) -> None:
    def add(index: int) -> None:
        conn = connection_save(
            connection=ProviderConnection(),
            fields={"provider": connection.provider, "name": f"n{index}"},
        )
        api_key_create(name=f"k{index}", allowed_connections=[conn])
        targets = [{"provider": connection.provider, "model": "m", "connection": conn}]
        combo_save(combo=Combo(), fields={"name": f"c{index}"}, targets=targets)

    add(0)
    with CaptureQueriesContext(db_connection) as few:
        manage_client.get(f"/api/{resource}/")
    for index in range(1, 4):
        add(index)
    with CaptureQueriesContext(db_connection) as many:
        assert manage_client.get(f"/api/{resource}/").json()["count"] >= 4

    assert len(many) == len(few)
