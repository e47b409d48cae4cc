"""The management API over HTTP: CRUD, write-only secrets, key lifecycle, auth and errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection as db_connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from routing.domain.keys import hash_key
from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save
from tests.routing.conftest import UPSTREAM_SECRET

pytestmark = pytest.mark.django_db

NEW_SECRET = "sk-upstream-ROTATED-0987654321"


def _error_fields(response: Any) -> dict[str, Any]:
    """The ``fields`` of an OpenAI-shaped 400, after checking the shape."""
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("Invalid input")
    fields: dict[str, Any] = error["fields"]
    return fields


def _assert_no_leak(response: Any, *secrets: str) -> None:
    for secret in secrets:
        assert secret.encode() not in response.content


def _connection_payload(**overrides: Any) -> dict[str, Any]:
    return {"provider": "mock", "name": "api-made", "secret": UPSTREAM_SECRET, **overrides}


# --- auth -------------------------------------------------------------------------------------


def test_anonymous_gets_401_in_openai_shape(api_client: APIClient) -> None:
    response = api_client.get("/api/providers/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_key_without_manage_scope_gets_403(api_client: APIClient, plain_key: str) -> None:
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain_key}")
    response = api_client.get("/api/providers/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_manage_key_works_as_bearer_and_x_api_key(api_client: APIClient, manage_key: str) -> None:
    assert (
        api_client.get("/api/providers/", HTTP_AUTHORIZATION=f"Bearer {manage_key}").status_code
        == 200
    )
    assert api_client.get("/api/providers/", HTTP_X_API_KEY=manage_key).status_code == 200


def test_unknown_or_expired_key_gets_401(api_client: APIClient) -> None:
    _, plaintext = api_key_create(
        name="old", scopes=["manage"], expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert api_client.get("/api/keys/", HTTP_X_API_KEY=plaintext).status_code == 401
    assert api_client.get("/api/keys/", HTTP_X_API_KEY="sk-omr-nope").status_code == 401


def test_staff_session_works(staff_client: Client) -> None:
    assert staff_client.get("/api/providers/mock/").status_code == 200
    response = staff_client.post(
        "/api/combos/", {"name": "staff-made"}, content_type="application/json"
    )
    assert response.status_code == 201


# --- providers --------------------------------------------------------------------------------


def test_provider_crud(manage_client: APIClient) -> None:
    payload = {"slug": "acme", "name": "Acme", "category": "api_key", "base_url": "https://a.io/v1"}

    created = manage_client.post("/api/providers/", payload, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["wire_format"] == "openai"

    assert "acme" in [p["slug"] for p in manage_client.get("/api/providers/").json()]
    patched = manage_client.patch("/api/providers/acme/", {"per_model_quota": True}, format="json")
    assert patched.json()["per_model_quota"] is True
    put = manage_client.put("/api/providers/acme/", {**payload, "name": "Acme 2"}, format="json")
    assert put.json()["name"] == "Acme 2"

    assert manage_client.delete("/api/providers/acme/").status_code == 204
    assert not Provider.objects.filter(slug="acme").exists()


def test_provider_slug_cannot_change(manage_client: APIClient, provider: Provider) -> None:
    response = manage_client.patch("/api/providers/mock/", {"slug": "other"}, format="json")
    assert "slug" in _error_fields(response)


def test_deleting_a_provider_in_use_is_409(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    response = manage_client.delete("/api/providers/mock/")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert Provider.objects.filter(slug="mock").exists()


# --- connections ------------------------------------------------------------------------------


def test_connection_create_keeps_secret_write_only(
    manage_client: APIClient, provider: Provider
) -> None:
    created = manage_client.post("/api/connections/", _connection_payload(), format="json")

    assert created.status_code == 201, created.content
    _assert_no_leak(created, UPSTREAM_SECRET)
    body = created.json()
    assert body["has_secret"] is True
    assert body["secret_preview"] == "••••7890"
    assert "secret" not in body and "refresh_secret" not in body
    stored = ProviderConnection.objects.get(pk=body["id"])
    assert stored.get_secret() == UPSTREAM_SECRET
    assert UPSTREAM_SECRET not in stored.secret_encrypted


def test_connection_list_and_retrieve_never_echo_the_secret(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    listed = manage_client.get("/api/connections/")
    retrieved = manage_client.get(f"/api/connections/{connection.pk}/")

    for response in (listed, retrieved):
        assert response.status_code == 200
        _assert_no_leak(response, UPSTREAM_SECRET, connection.secret_encrypted)
    assert retrieved.json()["secret_preview"] == "••••7890"


def test_connection_update_keeps_rotates_and_clears_the_secret(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    url = f"/api/connections/{connection.pk}/"

    kept = manage_client.patch(url, {"priority": 7}, format="json")
    assert kept.json()["has_secret"] is True
    assert ProviderConnection.objects.get(pk=connection.pk).get_secret() == UPSTREAM_SECRET

    rotated = manage_client.put(
        url, _connection_payload(name="primary", secret=NEW_SECRET), format="json"
    )
    assert rotated.json()["secret_preview"] == "••••4321"
    _assert_no_leak(rotated, UPSTREAM_SECRET, NEW_SECRET)

    cleared = manage_client.patch(url, {"secret": ""}, format="json")
    assert cleared.json()["has_secret"] is False
    assert cleared.json()["secret_preview"] == ""


def test_connection_delete(manage_client: APIClient, connection: ProviderConnection) -> None:
    assert manage_client.delete(f"/api/connections/{connection.pk}/").status_code == 204
    assert not ProviderConnection.objects.filter(pk=connection.pk).exists()


def test_connections_filter_by_provider(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    mine = manage_client.get("/api/connections/?provider=mock").json()
    others = manage_client.get("/api/connections/?provider=openai").json()
    assert [c["id"] for c in mine] == [connection.pk]
    assert others == []


def test_connection_missing_fields_are_named(manage_client: APIClient) -> None:
    fields = _error_fields(manage_client.post("/api/connections/", {}, format="json"))
    assert {"provider", "name"} <= set(fields)


def test_connection_duplicate_name_is_400(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    response = manage_client.post(
        "/api/connections/", _connection_payload(name="primary"), format="json"
    )
    assert response.status_code == 400


def test_connection_state_is_read_only(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    manage_client.patch(f"/api/connections/{connection.pk}/", {"backoff_level": 9}, format="json")
    assert ProviderConnection.objects.get(pk=connection.pk).backoff_level == 0


def test_clear_error_action_resets_state(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    now = timezone.now()
    ProviderConnection.objects.filter(pk=connection.pk).update(
        rate_limited_until=now + timedelta(minutes=2),
        test_status="unavailable",
        last_error="boom",
        last_error_at=now,
        last_error_type="server_error",
        error_code="502",
        backoff_level=2,
    )
    url = f"/api/connections/{connection.pk}/"
    assert manage_client.get(url).json()["cooldown_remaining_seconds"] > 100

    body = manage_client.post(f"{url}clear_error/").json()

    assert body["cooldown_remaining_seconds"] == 0
    assert body["rate_limited_until"] is None
    assert body["test_status"] == "active"
    assert (body["last_error"], body["last_error_type"], body["error_code"]) == ("", "", "")
    assert body["backoff_level"] == 0
    assert ProviderConnection.objects.get(pk=connection.pk).backoff_level == 0


# --- client keys ------------------------------------------------------------------------------


def test_key_create_returns_the_plaintext_once(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    payload = {
        "name": "ci",
        "scopes": ["manage"],
        "allowed_models": ["mock/*"],
        "allowed_connections": [connection.pk],
    }

    created = manage_client.post("/api/keys/", payload, format="json")

    assert created.status_code == 201, created.content
    body = created.json()
    plaintext = body["key"]
    assert plaintext.startswith("sk-omr-") and body["prefix"] == plaintext[:12]
    assert body["allowed_connections"] == [connection.pk]
    stored = ClientApiKey.objects.get(pk=body["id"])
    assert hash_key(plaintext).encode() not in created.content
    for response in (manage_client.get("/api/keys/"), manage_client.get(f"/api/keys/{stored.pk}/")):
        assert response.status_code == 200
        _assert_no_leak(response, plaintext, stored.key_hash)
        assert b'"key"' not in response.content


def test_key_update(manage_client: APIClient, connection: ProviderConnection) -> None:
    key, _ = api_key_create(name="ci")
    url = f"/api/keys/{key.pk}/"

    body = manage_client.patch(
        url, {"scopes": ["lease:exclusive"], "allowed_connections": [connection.pk]}, format="json"
    ).json()

    assert body["scopes"] == ["lease:exclusive"]
    assert body["allowed_connections"] == [connection.pk]
    assert manage_client.put(url, {"name": "renamed"}, format="json").json()["name"] == "renamed"


def test_key_unknown_scope_is_400(manage_client: APIClient) -> None:
    fields = _error_fields(
        manage_client.post("/api/keys/", {"name": "x", "scopes": ["root"]}, format="json")
    )
    assert "scopes" in fields
    assert not ClientApiKey.objects.filter(name="x").exists()


def test_key_missing_name_is_400(manage_client: APIClient) -> None:
    assert "name" in _error_fields(manage_client.post("/api/keys/", {}, format="json"))


def test_revoked_key_gets_401(manage_client: APIClient, api_client: APIClient) -> None:
    created = manage_client.post(
        "/api/keys/", {"name": "temp", "scopes": ["manage"]}, format="json"
    ).json()
    other = APIClient()
    other.credentials(HTTP_X_API_KEY=created["key"])
    assert other.get("/api/keys/").status_code == 200

    revoked = manage_client.post(f"/api/keys/{created['id']}/revoke/")
    again = manage_client.post(f"/api/keys/{created['id']}/revoke/")

    assert revoked.json()["revoked_at"] is not None and revoked.json()["is_active"] is False
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    assert other.get("/api/keys/").status_code == 401


def test_deleted_key_gets_401(manage_client: APIClient) -> None:
    key, plaintext = api_key_create(name="gone", scopes=["manage"])

    assert manage_client.delete(f"/api/keys/{key.pk}/").status_code == 204

    assert not ClientApiKey.objects.filter(pk=key.pk).exists()
    assert APIClient().get("/api/keys/", HTTP_X_API_KEY=plaintext).status_code == 401


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
    assert [c["name"] for c in manage_client.get("/api/combos/?name=team/chat").json()] == [
        "team/chat"
    ]

    assert manage_client.delete(url).status_code == 204
    assert not Combo.objects.exists()


@pytest.mark.parametrize("strategy", ["weighted", "no-such-strategy"])
def test_combo_unavailable_strategy_is_400(
    manage_client: APIClient, connection: ProviderConnection, strategy: str
) -> None:
    response = manage_client.post(
        "/api/combos/", _combo_payload(connection, strategy=strategy), format="json"
    )
    assert "strategy" in _error_fields(response)
    assert not Combo.objects.exists()


def test_combo_pinned_connection_of_another_provider_is_400(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    targets = [{"provider": "openai", "model": "gpt-4o", "connection": connection.pk}]

    response = manage_client.post(
        "/api/combos/", {"name": "bad", "targets": targets}, format="json"
    )

    fields = _error_fields(response)
    assert "connection" in fields["targets"]["0"]  # DRF keys nested list errors by index
    assert not Combo.objects.exists()


def test_combo_missing_name_is_400(manage_client: APIClient) -> None:
    assert "name" in _error_fields(manage_client.post("/api/combos/", {}, format="json"))


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
        assert len(manage_client.get(f"/api/{resource}/").json()) >= 4

    assert len(many) == len(few)
