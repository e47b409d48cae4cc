"""The session-affinity pins in the admin: listed by their hash only (never a session id),
read-only, cleared by the action or the "Clear all pins" button through the service, which
clears the live pin in the state store too."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from omniroute.core import tasks
from omniroute.core.store import MemoryStore
from routing.domain.affinity.pins import pin_hash
from routing.models import Provider, SessionAffinityPin
from routing.services.affinity import affinity_pin_answered, pin_key
from tests.routing.harness import add_connection

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:routing_sessionaffinitypin_changelist")
CLEAR_ALL = reverse("admin:routing_sessionaffinitypin_clear_all")
SESSIONS = ("session-alpha", "session-bravo")


@pytest.fixture
def pins(acme: Provider, fresh_process_store: MemoryStore) -> list[str]:
    """Two sessions pinned to ``acme``'s connection, their pin hashes."""
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


def test_the_list_shows_pins_by_their_hash_only(staff_client: Client, pins: list[str]) -> None:
    response = staff_client.get(CHANGELIST)

    page = response.content.decode()
    assert response.status_code == 200
    assert all(key_hash[:12] in page for key_hash in pins)
    assert not any(session in page for session in SESSIONS)
    assert ">acme<" in page and ">primary<" in page and "Clear all pins" in page
    assert "Clear selected pins" in page


def test_pins_cannot_be_added_edited_or_deleted_by_hand(
    staff_client: Client, pins: list[str]
) -> None:
    pin = SessionAffinityPin.objects.first()
    assert pin is not None
    change = reverse("admin:routing_sessionaffinitypin_change", args=[pin.pk])
    delete = reverse("admin:routing_sessionaffinitypin_delete", args=[pin.pk])

    assert staff_client.get(reverse("admin:routing_sessionaffinitypin_add")).status_code == 403
    assert b'name="_save"' not in staff_client.get(change).content
    assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    assert SessionAffinityPin.objects.count() == 2


def test_the_clear_action_clears_the_selected_pins_and_their_live_state(
    staff_client: Client, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    chosen = SessionAffinityPin.objects.get(key_hash=pins[0])

    response = staff_client.post(
        CHANGELIST, {"action": "clear_pins", "_selected_action": [chosen.pk]}
    )

    assert response.status_code == 302
    assert list(SessionAffinityPin.objects.values_list("key_hash", flat=True)) == [pins[1]]
    assert not live(fresh_process_store, pins[0]) and live(fresh_process_store, pins[1])
    assert "Cleared 1 pin(s)." in [str(m) for m in get_messages(response.wsgi_request)]


def test_clear_all_clears_every_pin(
    staff_client: Client, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    assert staff_client.get(CLEAR_ALL).status_code == 405

    response = staff_client.post(CLEAR_ALL)

    assert response.status_code == 302 and response["Location"] == CHANGELIST
    assert not SessionAffinityPin.objects.exists()
    assert not any(live(fresh_process_store, key_hash) for key_hash in pins)


def test_clearing_takes_the_delete_permission(
    django_user_model: Any, pins: list[str], fresh_process_store: MemoryStore
) -> None:
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    client = Client()
    client.force_login(viewer)

    assert client.post(CLEAR_ALL).status_code == 403
    assert SessionAffinityPin.objects.count() == 2 and live(fresh_process_store, pins[0])
