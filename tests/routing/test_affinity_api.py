"""``/api/affinity-pins/``: the pins the admin lists, cleared one by one, by selection or all at
once through the admin's service (the live pin in the state store goes too)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from omniroute.core import tasks
from omniroute.core.store import MemoryStore
from routing.domain.affinity.pins import pin_hash
from routing.models import Provider, SessionAffinityPin
from routing.services.affinity import affinity_pin_answered, pin_key
from tests.routing.harness import add_connection

pytestmark = pytest.mark.django_db

URL = "/api/affinity-pins/"
SESSIONS = ("session-alpha", "session-bravo", "session-charlie")


@pytest.fixture
def pins(acme: Provider, fresh_process_store: MemoryStore) -> list[str]:
    """Three sessions pinned to ``acme``'s connection, their pin hashes."""
    connection = add_connection(acme, "primary", "sk-acme-1")
    hashes = [pin_hash("acme", f"1:header:{session}") for session in SESSIONS]

    async def pin_all() -> None:
        for key_hash in hashes:
            await affinity_pin_answered(
                store=fresh_process_store,
                provider="acme",
                key_hash=key_hash,
                connection_id=connection,
                ttl_seconds=600,
            )
        await tasks.flush()

    async_to_sync(pin_all)()
    return hashes


def live(store: MemoryStore, key_hash: str) -> bool:
    return async_to_sync(store.get)(pin_key("acme", key_hash)) is not None


def _id(key_hash: str) -> int:
    return SessionAffinityPin.objects.get(key_hash=key_hash).pk


def test_the_list_shows_pins_by_the_start_of_their_hash_only(
    manage_client: APIClient, pins: list[str]
) -> None:
    response = manage_client.get(URL)

    body = response.json()
    assert body["count"] == 3
    assert {p["session"] for p in body["results"]} == {h[:12] for h in pins}
    assert {p["connection_name"] for p in body["results"]} == {"primary"}
    assert not any(h.encode() in response.content for h in pins)
    assert not any(s.encode() in response.content for s in SESSIONS)


def test_the_list_filters_by_provider_and_searches_the_hash(
    manage_client: APIClient, pins: list[str]
) -> None:
    found = manage_client.get(URL, {"search": pins[1][:20]}).json()["results"]
    elsewhere = manage_client.get(URL, {"provider": "openai"}).json()

    assert [p["session"] for p in found] == [pins[1][:12]]
    assert elsewhere["count"] == 0


def test_clear_one_pin(
    manage_client: APIClient, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    response = manage_client.delete(f"{URL}{_id(pins[0])}/")

    assert response.json() == {"cleared": 1}
    assert not live(fresh_process_store, pins[0]) and live(fresh_process_store, pins[1])
    assert SessionAffinityPin.objects.count() == 2


def test_clear_the_selected_pins(
    manage_client: APIClient, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    chosen = [_id(pins[0]), _id(pins[2]), 99_999]

    response = manage_client.post(f"{URL}clear/", {"ids": chosen}, format="json")

    assert response.json() == {"cleared": 2}
    assert [live(fresh_process_store, h) for h in pins] == [False, True, False]
    assert list(SessionAffinityPin.objects.values_list("key_hash", flat=True)) == [pins[1]]


def test_clear_every_pin(
    manage_client: APIClient, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    response = manage_client.post(f"{URL}clear-all/")

    assert response.json() == {"cleared": 3}
    assert not any(live(fresh_process_store, h) for h in pins)
    assert not SessionAffinityPin.objects.exists()


def test_pins_need_an_operator(api_client: APIClient, plain_key: str, pins: list[str]) -> None:
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain_key}")

    assert api_client.get(URL).status_code == 403
    assert api_client.post(f"{URL}clear-all/").status_code == 403
    assert SessionAffinityPin.objects.count() == 3
