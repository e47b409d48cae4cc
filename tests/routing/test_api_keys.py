"""The management API over HTTP for client keys and authentication: 401/403 in OpenAI shape,
Bearer and X-API-Key, staff sessions, the plaintext key shown once, revoke and delete.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from routing.domain.config.keys import hash_key
from routing.models import ClientApiKey, ProviderConnection
from routing.services import api_key_create
from tests.routing.api_support import assert_no_leak, error_fields

pytestmark = pytest.mark.django_db


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
        assert_no_leak(response, plaintext, stored.key_hash)
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
    fields = error_fields(
        manage_client.post("/api/keys/", {"name": "x", "scopes": ["root"]}, format="json")
    )
    assert "scopes" in fields
    assert not ClientApiKey.objects.filter(name="x").exists()


def test_key_missing_name_is_400(manage_client: APIClient) -> None:
    assert "name" in error_fields(manage_client.post("/api/keys/", {}, format="json"))


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
