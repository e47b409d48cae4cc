"""The management API over HTTP for providers and their connections: CRUD, the write-only
upstream secret (kept, rotated, cleared, never echoed), filters, read-only state, ``clear_error``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from routing.models import Provider, ProviderConnection
from tests.routing.api_support import assert_no_leak, error_fields
from tests.routing.conftest import UPSTREAM_SECRET

pytestmark = pytest.mark.django_db

NEW_SECRET = "sk-upstream-ROTATED-0987654321"


def _connection_payload(**overrides: Any) -> dict[str, Any]:
    return {"provider": "mock", "name": "api-made", "secret": UPSTREAM_SECRET, **overrides}


# --- providers --------------------------------------------------------------------------------


def test_provider_crud(manage_client: APIClient) -> None:
    payload = {"slug": "acme", "name": "Acme", "category": "api_key", "base_url": "https://a.io/v1"}

    created = manage_client.post("/api/providers/", payload, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["wire_format"] == "openai"

    assert "acme" in [
        p["slug"] for p in manage_client.get("/api/providers/?limit=500").json()["results"]
    ]
    patched = manage_client.patch("/api/providers/acme/", {"per_model_quota": True}, format="json")
    assert patched.json()["per_model_quota"] is True
    put = manage_client.put("/api/providers/acme/", {**payload, "name": "Acme 2"}, format="json")
    assert put.json()["name"] == "Acme 2"

    assert manage_client.delete("/api/providers/acme/").status_code == 204
    assert not Provider.objects.filter(slug="acme").exists()


UNUSABLE_URLS = {
    "ftp": "ftp://a.io/v1",
    "ftps": "ftps://a.io/v1",
    "file": "file:///etc/passwd",
    "not an international name": "http://\u2167.test/v1",
    "a control character": "http://a.test/v1/\x7f",
    "port 0": "http://a.test:0/v1",
    "port 99999": "http://a.test:99999/v1",
}
UNUSABLE_BASE_URLS = {
    **UNUSABLE_URLS,
    "a query": "https://a.test/v1?api-version=1",
    "a fragment": "https://a.test/v1#chat",
}


@pytest.mark.parametrize("url", list(UNUSABLE_BASE_URLS.values()), ids=list(UNUSABLE_BASE_URLS))
def test_an_upstream_url_must_be_one_the_gateway_can_use(
    manage_client: APIClient, url: str
) -> None:
    """URLField alone takes each of these: every attempt would then fail in the gateway (a 500,
    or a network error counted against the provider), or go to another path."""
    payload = {"slug": "acme", "name": "Acme", "category": "api_key", "base_url": url}

    response = manage_client.post("/api/providers/", payload, format="json")

    assert "base_url" in error_fields(response)
    assert not Provider.objects.filter(slug="acme").exists()


@pytest.mark.parametrize("field", ["base_url", "proxy_url"])
@pytest.mark.parametrize("url", list(UNUSABLE_URLS.values()), ids=list(UNUSABLE_URLS))
def test_a_connection_url_must_be_one_the_gateway_can_use(
    manage_client: APIClient, connection: ProviderConnection, field: str, url: str
) -> None:
    url = url.replace("://", "://user:proxy-password-0001@", 1)
    created = manage_client.post("/api/connections/", _connection_payload(**{field: url}))
    patched = manage_client.patch(f"/api/connections/{connection.pk}/", {field: url}, format="json")

    for refused in (created, patched):
        assert field in error_fields(refused)
        assert_no_leak(refused, "proxy-password-0001")
    assert getattr(ProviderConnection.objects.get(pk=connection.pk), field) == ""
    https = manage_client.patch(
        f"/api/connections/{connection.pk}/", {field: "https://proxy.test:8443/v1"}, format="json"
    )
    assert https.status_code == 200, https.content


def test_provider_slug_cannot_change(manage_client: APIClient, provider: Provider) -> None:
    response = manage_client.patch("/api/providers/mock/", {"slug": "other"}, format="json")
    assert "slug" in error_fields(response)


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
    assert_no_leak(created, UPSTREAM_SECRET)
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
        assert_no_leak(response, UPSTREAM_SECRET, connection.secret_encrypted)
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
    assert_no_leak(rotated, UPSTREAM_SECRET, NEW_SECRET)

    cleared = manage_client.patch(url, {"secret": ""}, format="json")
    assert cleared.json()["has_secret"] is False
    assert cleared.json()["secret_preview"] == ""


@pytest.mark.parametrize(
    "secret",
    ["sk-caf\u00e9-123", "sk-123\r\nx-injected: 1", " sk-123"],
    ids=["not-ascii", "line-break", "leading-space"],
)
def test_a_secret_that_cannot_be_a_header_is_refused_by_name(
    manage_client: APIClient, connection: ProviderConnection, secret: str
) -> None:
    created = manage_client.post(
        "/api/connections/", _connection_payload(secret=secret), format="json"
    )
    patched = manage_client.patch(
        f"/api/connections/{connection.pk}/", {"secret": secret}, format="json"
    )

    for refused in (created, patched):
        assert "secret" in error_fields(refused)
        assert_no_leak(refused, secret)
    assert ProviderConnection.objects.get(pk=connection.pk).get_secret() == UPSTREAM_SECRET


def test_connection_delete(manage_client: APIClient, connection: ProviderConnection) -> None:
    assert manage_client.delete(f"/api/connections/{connection.pk}/").status_code == 204
    assert not ProviderConnection.objects.filter(pk=connection.pk).exists()


def test_connections_filter_by_provider(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    mine = manage_client.get("/api/connections/?provider=mock").json()["results"]
    others = manage_client.get("/api/connections/?provider=openai").json()["results"]
    assert [c["id"] for c in mine] == [connection.pk]
    assert others == []


def test_connection_missing_fields_are_named(manage_client: APIClient) -> None:
    fields = error_fields(manage_client.post("/api/connections/", {}, format="json"))
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


@pytest.mark.django_db
def test_a_proxy_password_is_never_returned_and_survives_a_round_trip(
    api_client: APIClient, manage_key: str, connection: ProviderConnection
) -> None:
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {manage_key}")
    url = f"/api/connections/{connection.pk}/"
    proxy = "http://alice:hunter2-proxy@proxy.example:8080"

    patched = api_client.patch(url, {"proxy_url": proxy}, format="json")
    shown = api_client.get(url).json()["proxy_url"]
    echoed = api_client.patch(url, {"proxy_url": shown}, format="json")  # sent back as shown

    assert b"hunter2-proxy" not in patched.content + echoed.content
    assert shown == "http://alice:••••@proxy.example:8080"
    connection.refresh_from_db()
    assert connection.proxy_url == proxy


@pytest.mark.parametrize("extras", ['{"a": 1e400}', '{"a": [1, {"b": -1e400}]}'])
def test_extras_that_json_cannot_store_are_refused_on_the_field(
    manage_client: APIClient, connection: ProviderConnection, extras: str
) -> None:
    """1e400 parses as infinity, which the database's JSON check refused with a 500."""
    body = '{"extras": ' + extras + "}"
    patched = manage_client.patch(
        f"/api/connections/{connection.pk}/", body, content_type="application/json"
    )

    assert "extras" in error_fields(patched)
    assert ProviderConnection.objects.get(pk=connection.pk).extras == {}
