"""The configuration collections page, filter like their admin lists and search like them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from rest_framework.test import APIClient

from omniroute.core.store import MemoryStore
from resilience.domain.connection_state import BANNED, UNAVAILABLE, ConnectionState
from resilience.services.connections import connection_key
from routing.models import Provider, ProviderConnection
from routing.services import api_key_create, api_key_revoke
from tests.routing.harness import add_connection, add_provider

pytestmark = pytest.mark.django_db


def _results(client: APIClient, url: str, **query: str) -> list[dict[str, object]]:
    response = client.get(url, query)
    assert response.status_code == 200, response.content
    results: list[dict[str, object]] = response.json()["results"]
    return results


def test_providers_filter_on_a_quirk_and_search_the_base_url(manage_client: APIClient) -> None:
    add_provider("acme", per_model_quota=True)
    add_provider("bravo", per_model_quota=False)

    quota = _results(manage_client, "/api/providers/", per_model_quota="true", search="test/v1")

    assert [p["slug"] for p in quota] == ["acme"]


def test_connections_search_filter_and_live_state(
    manage_client: APIClient, acme: Provider, fresh_process_store: MemoryStore
) -> None:
    cooling = add_connection(acme, "cooling one", "sk-acme-1")
    add_connection(acme, "calm one", "sk-acme-2", is_active=False)
    until = timezone.now().timestamp() + 300
    state = ConnectionState(test_status=UNAVAILABLE, rate_limited_until=until, error_code="429")
    async_to_sync(fresh_process_store.set)(connection_key(cooling), state.to_dict())

    found = _results(manage_client, "/api/connections/", search="calm")
    inactive = _results(manage_client, "/api/connections/", provider="acme", is_active="false")
    cool = _results(manage_client, "/api/connections/", state="cooling")

    assert [c["name"] for c in found] == ["calm one"]
    assert [c["name"] for c in inactive] == ["calm one"]
    assert [c["id"] for c in cool] == [cooling]
    assert manage_client.get("/api/connections/", {"state": "sleepy"}).status_code == 400


def test_the_live_state_filter_takes_the_store_over_the_row(
    manage_client: APIClient, acme: Provider, fresh_process_store: MemoryStore
) -> None:
    later = timezone.now() + timedelta(minutes=5)
    names = ("row cooling", "row cooling, store clean", "row banned", "store banned", "calm")
    ids = {name: add_connection(acme, name, f"sk-acme-{i}") for i, name in enumerate(names)}
    rows = ProviderConnection.objects
    rows.filter(pk__in=[ids["row cooling"], ids["row cooling, store clean"]]).update(
        test_status=UNAVAILABLE, rate_limited_until=later
    )
    rows.filter(pk=ids["row banned"]).update(test_status=BANNED)
    store_set = async_to_sync(fresh_process_store.set)
    store_set(connection_key(ids["row cooling, store clean"]), ConnectionState().to_dict())
    store_set(connection_key(ids["store banned"]), ConnectionState(test_status=BANNED).to_dict())

    cooling = _results(manage_client, "/api/connections/", state="cooling")
    terminal = _results(manage_client, "/api/connections/", state="terminal")

    assert sorted(str(c["name"]) for c in cooling) == ["row cooling"]
    assert sorted(str(c["name"]) for c in terminal) == ["row banned", "store banned"]


def test_keys_filter_on_revoked(manage_client: APIClient) -> None:
    api_key_create(name="kept")
    gone, _ = api_key_create(name="gone")
    api_key_revoke(key=gone, now=timezone.now())

    revoked = _results(manage_client, "/api/keys/", revoked="true")
    live = _results(manage_client, "/api/keys/", revoked="false", search="kep")

    assert [k["name"] for k in revoked] == ["gone"]
    assert [k["name"] for k in live] == ["kept"]


def test_a_page_is_bounded_and_counts_every_row(manage_client: APIClient) -> None:
    for index in range(3):
        add_provider(f"page{index}")

    page = manage_client.get("/api/providers/", {"limit": "2", "search": "page"}).json()
    rest = manage_client.get("/api/providers/", {"limit": "2", "offset": "2", "search": "page"})
    rest = rest.json()

    assert page["count"] == 3 and page["previous"] is None and page["next"]
    assert [p["slug"] for p in page["results"] + rest["results"]] == ["page0", "page1", "page2"]
    assert rest["next"] is None


def test_a_filter_value_of_the_wrong_kind_is_a_400(manage_client: APIClient) -> None:
    response = manage_client.get("/api/combos/", {"is_active": "sometimes"})

    assert response.status_code == 400
    assert "is_active" in response.json()["error"]["fields"]
