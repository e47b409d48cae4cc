"""``/api/resilience/model-cooldowns``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection as db_connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from omniroute.core.store import StateStore
from resilience.domain.lockout import LockScope
from resilience.services.lockout_operations import lockout_list
from tests.resilience.lockout_support import connection, lock

pytestmark = pytest.mark.django_db

URL = "/api/resilience/model-cooldowns"


def _listed(store: StateStore) -> list[tuple[str, int, str]]:
    views = async_to_sync(lockout_list)(store=store)
    return sorted((v.provider, v.connection_id, v.model) for v in views)


def _error(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content
    error: dict[str, Any] = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_request")
    return error


def _delete(client: APIClient, body: Any) -> Any:
    return client.delete(URL, body, format="json")


# --- GET ----------------------------------------------------------------------------------------


def test_get_lists_the_locks_longest_first(
    manage_client: APIClient, process_store: StateStore
) -> None:
    main, spare = connection("openai", "Main account"), connection("anthropic", "Spare")
    lock(process_store, "openai", main, "gpt-4o")  # 120 s
    lock(process_store, "anthropic", spare, "Claude-X", seconds=600, scope=LockScope.EXACT)

    response = manage_client.get(URL)

    assert response.status_code == 200
    items = response.json()["items"]
    assert [(i["provider"], i["model"], i["exact"]) for i in items] == [
        ("anthropic", "claude-x", True),
        ("openai", "gpt-4o", False),
    ]
    first = items[0]
    assert set(first) == {
        "provider",
        "connectionId",
        "accountLabel",
        "model",
        "reason",
        "timerClass",
        "remainingMs",
        "failureCount",
        "lockedAt",
        "lockedAtMs",
        "until",
        "expiresAt",
        "exact",
    }
    assert (first["connectionId"], first["accountLabel"]) == (spare, "Spare")
    assert (first["reason"], first["failureCount"]) == ("rate_limit", 1)
    assert 599_000 < first["remainingMs"] <= 600_000
    assert first["until"] - first["lockedAtMs"] == 600_000
    assert dt.datetime.fromisoformat(first["lockedAt"]).timestamp() * 1000 == pytest.approx(
        first["lockedAtMs"], abs=1
    )
    assert dt.datetime.fromisoformat(first["expiresAt"]).timestamp() * 1000 == pytest.approx(
        first["until"], abs=1
    )
    assert items[1]["accountLabel"] == "Main account"


def test_get_pages_with_limit_and_offset_and_keeps_the_total(
    manage_client: APIClient, process_store: StateStore
) -> None:
    for index, seconds in enumerate((100, 200, 300)):
        lock(
            process_store,
            "openai",
            connection("openai", f"acct {index}"),
            "gpt-4o",
            seconds=seconds,
        )

    page = manage_client.get(URL, {"limit": 1, "offset": 1}).json()
    beyond = manage_client.get(URL, {"limit": 5, "offset": 7}).json()

    assert page["total"] == 3
    assert [item["accountLabel"] for item in page["items"]] == ["acct 1"]
    assert beyond == {"items": [], "total": 3}
    assert _error(manage_client.get(URL, {"limit": "many"}))["fields"] == {
        "limit": ["A whole number."]
    }


def test_get_looks_the_names_up_in_one_query(
    manage_client: APIClient, process_store: StateStore
) -> None:
    for index in range(4):
        lock(process_store, "openai", connection("openai", f"acct {index}"), "gpt-4o")
    lock(process_store, "openai", 9_999, "gpt-4o")  # a connection deleted since

    with CaptureQueriesContext(db_connection) as queries:
        items = manage_client.get(URL).json()["items"]

    assert len(items) == 5
    assert "9999" in {i["accountLabel"] for i in items}
    names = [q for q in queries.captured_queries if "routing_providerconnection" in q["sql"]]
    assert len(names) == 1


def test_get_with_nothing_locked(manage_client: APIClient, process_store: StateStore) -> None:
    assert manage_client.get(URL).json() == {"items": [], "total": 0}


# --- DELETE -------------------------------------------------------------------------------------


def test_delete_all(manage_client: APIClient, process_store: StateStore) -> None:
    lock(process_store, "openai", connection("openai", "a"), "gpt-4o")
    lock(process_store, "anthropic", connection("anthropic", "b"), "claude")

    response = _delete(manage_client, {"all": True})

    assert response.status_code == 200
    assert response.json() == {"ok": True, "clearedAll": True}
    assert _listed(process_store) == []


@pytest.mark.parametrize("key", ["connectionId", "connection"])
def test_delete_one_connection_model(
    manage_client: APIClient, process_store: StateStore, key: str
) -> None:
    first, second = connection("openai", "a"), connection("openai", "b")
    for conn in (first, second):
        lock(process_store, "openai", conn, "gpt-4o")

    response = _delete(manage_client, {"provider": " openai ", "model": "gpt-4o ", key: first})

    assert response.status_code == 200, response.content
    assert response.json() == {
        "ok": True,
        "removed": True,
        "removedCount": 1,
        "scope": "connection-model",
    }
    assert _listed(process_store) == [("openai", second, "gpt-4o")]


def test_delete_a_model_on_every_connection_of_the_provider(
    manage_client: APIClient, process_store: StateStore
) -> None:
    first, second = connection("openai", "a"), connection("openai", "b")
    for conn in (first, second):
        lock(process_store, "openai", conn, "gpt-4o")
    lock(process_store, "openai", first, "o3")

    response = _delete(manage_client, {"provider": "openai", "model": "gpt-4o"})

    assert response.json() == {
        "ok": True,
        "removed": True,
        "removedCount": 2,
        "scope": "provider-model",
    }
    assert _listed(process_store) == [("openai", first, "o3")]


def test_delete_of_nothing_locked_removes_nothing(
    manage_client: APIClient, process_store: StateStore
) -> None:
    response = _delete(manage_client, {"provider": "openai", "model": "gpt-4o", "connectionId": 3})
    assert response.json() == {
        "ok": True,
        "removed": False,
        "removedCount": 0,
        "scope": "connection-model",
    }


def test_removed_is_a_boolean_beside_the_count(
    manage_client: APIClient, process_store: StateStore
) -> None:
    main = connection("openai", "a")
    lock(process_store, "openai", main, "gpt-4o")
    body = {"provider": "openai", "model": "gpt-4o"}

    first, second = _delete(manage_client, body).json(), _delete(manage_client, body).json()

    assert (first["removed"], first["removedCount"]) == (True, 1)
    assert (second["removed"], second["removedCount"]) == (False, 0)
    assert first["removed"] is True and second["removed"] is False  # not 1 / 0


def test_delete_all_of_one_provider_keeps_the_others(
    manage_client: APIClient, process_store: StateStore
) -> None:
    first, second = connection("openai", "a"), connection("openai", "b")
    spare = connection("anthropic", "c")
    lock(process_store, "openai", first, "gpt-4o")
    lock(process_store, "openai", first, "o3")
    lock(process_store, "openai", second, "gpt-4o")
    lock(process_store, "anthropic", spare, "claude")

    response = _delete(manage_client, {"all": True, "provider": "openai"})

    assert response.status_code == 200, response.content
    assert response.json() == {"ok": True, "removed": True, "removedCount": 3, "scope": "provider"}
    assert _listed(process_store) == [("anthropic", spare, "claude")]


@pytest.mark.parametrize("key", ["connectionId", "connection"])
@pytest.mark.parametrize("provider", [None, "openai"])
def test_delete_all_of_one_connection_keeps_the_others(
    manage_client: APIClient, process_store: StateStore, key: str, provider: str | None
) -> None:
    first, second = connection("openai", "a"), connection("openai", "b")
    lock(process_store, "openai", first, "gpt-4o")
    lock(process_store, "openai", first, "o3")
    lock(process_store, "openai", second, "gpt-4o")
    body: dict[str, Any] = {"all": True, key: first}
    if provider is not None:
        body["provider"] = provider

    response = _delete(manage_client, body)

    assert response.json() == {
        "ok": True,
        "removed": True,
        "removedCount": 2,
        "scope": "connection",
    }
    assert _listed(process_store) == [("openai", second, "gpt-4o")]


def test_delete_all_of_a_provider_with_nothing_locked_removes_nothing(
    manage_client: APIClient, process_store: StateStore
) -> None:
    lock(process_store, "openai", connection("openai", "a"), "gpt-4o")

    response = _delete(manage_client, {"all": True, "provider": "anthropic"})

    assert response.json() == {"ok": True, "removed": False, "removedCount": 0, "scope": "provider"}
    assert len(_listed(process_store)) == 1


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"provider", "model"}),
        ({"all": False}, {"provider", "model"}),
        ({"provider": "openai"}, {"model"}),
        ({"provider": "  ", "model": "gpt-4o"}, {"provider"}),
        ({"model": "gpt-4o", "connectionId": 1}, {"provider"}),
    ],
)
def test_delete_needs_provider_and_model(
    manage_client: APIClient, process_store: StateStore, body: dict[str, Any], fields: set[str]
) -> None:
    lock(process_store, "openai", 1, "gpt-4o")

    error = _error(_delete(manage_client, body))

    assert set(error["fields"]) == fields
    assert all(m == ["provider and model are required"] for m in error["fields"].values())
    assert all(name in error["message"] for name in fields)
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"provider": "openai", "model": "m", "connectionId": "abc"}, "connectionId"),
        ({"all": "sometimes"}, "all"),
        ({"all": "yes"}, "all"),  # DRF's lenient booleans: not a JSON boolean, not "all"
        ({"all": 1}, "all"),
        ({"all": "on"}, "all"),
        ([1, 2], "non_field_errors"),
    ],
)
def test_delete_rejects_a_malformed_body(
    manage_client: APIClient, process_store: StateStore, body: Any, field: str
) -> None:
    assert field in _error(_delete(manage_client, body))["fields"]


def test_delete_with_broken_json_is_400(
    manage_client: APIClient, process_store: StateStore
) -> None:
    response = manage_client.generic("DELETE", URL, "{nope", content_type="application/json")
    _error(response)


# --- auth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "delete"])
def test_anonymous_gets_401(api_client: APIClient, process_store: StateStore, method: str) -> None:
    response = getattr(api_client, method)(URL, {"all": True}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("method", ["get", "delete"])
def test_key_without_manage_scope_gets_403(
    plain_client: APIClient, process_store: StateStore, method: str
) -> None:
    lock(process_store, "openai", 1, "gpt-4o")

    response = getattr(plain_client, method)(URL, {"all": True}, format="json")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


def test_staff_session_can_list_and_clear(staff_client: Client, process_store: StateStore) -> None:
    lock(process_store, "openai", 1, "gpt-4o")

    assert len(staff_client.get(URL).json()["items"]) == 1
    response = staff_client.delete(URL, '{"all": true}', content_type="application/json")

    assert response.json() == {"ok": True, "clearedAll": True}


def test_schema_documents_the_endpoint(manage_client: APIClient) -> None:
    operations = manage_client.get("/api/schema/", {"format": "json"}).json()["paths"][URL]
    assert set(operations) == {"get", "delete"}
    # drf-spectacular documents no DELETE body, so the description carries both forms
    assert '{"all": true}' in operations["delete"]["description"]
