"""``GET /api/sessions`` and ``POST /api/sessions/<sessionId>/revoke``: the exclusive sessions
an operator sees (never an owner, its hash, a generation or a key) and the admin's revoke
action through the API."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from rest_framework.test import APIClient

from leases import sessions
from leases.activity import ACTIVE_WINDOW_SECONDS, activity_key
from leases.domain.claims import LeaseClaim
from leases.domain.states import EndReason
from leases.managed import lease_binding
from leases.models import ExclusiveConnectionLease
from leases.services import lease_transition
from omniroute.core.store import MemoryStore
from routing.models import ProviderConnection
from tests.leases.support import acquire, new_owner_hash

pytestmark = pytest.mark.django_db

URL = "/api/sessions"
FIELDS = {
    "sessionId",
    "connectionId",
    "connectionName",
    "active",
    "ageMs",
    "requestCount",
    "leaseBacked",
}


@dataclasses.dataclass(frozen=True)
class _Ref:
    id: int


@dataclasses.dataclass(frozen=True)
class _Target:
    connection: _Ref


def _lease(connection_id: int, owner: str | None = None) -> ExclusiveConnectionLease:
    result = acquire(owner or new_owner_hash(), connection_id=connection_id, now=timezone.now())
    assert result.lease is not None
    return ExclusiveConnectionLease.objects.get(pk=result.lease.id)


def _bind(row: ExclusiveConnectionLease) -> None:
    """One managed request bound under ``row``, as the proxy's lease step binds it."""
    claim = LeaseClaim(row.lease_owner_hash, row.generation, row.api_key_id)
    target = _Target(_Ref(row.connection_id))
    async_to_sync(lease_binding)(claim, [target], pinned=(), now=timezone.now(), request_id="test")


def test_a_session_shows_only_the_reference_fields(
    manage_client: APIClient, connection: ProviderConnection, fresh_process_store: MemoryStore
) -> None:
    row = _lease(connection.pk)
    _bind(row)
    _bind(row)

    response = manage_client.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert body["total"] == 1
    [session] = body["exclusiveSessions"]
    assert set(session) == FIELDS
    assert session["sessionId"] == f"lease:{connection.pk}"
    assert (session["connectionId"], session["connectionName"]) == (connection.pk, "primary")
    assert (session["requestCount"], session["active"], session["leaseBacked"]) == (2, True, True)
    assert 0 <= session["ageMs"] < 60_000
    assert row.lease_owner_hash.encode() not in response.content
    assert b"generation" not in response.content and b"expires" not in response.content


def test_a_session_without_a_recent_request_is_not_active(
    manage_client: APIClient, connection: ProviderConnection, fresh_process_store: MemoryStore
) -> None:
    row = _lease(connection.pk)
    last = fresh_process_store.clock() - ACTIVE_WINDOW_SECONDS - 1
    async_to_sync(fresh_process_store.set)(activity_key(row.pk), {"count": 4, "last": last})
    idle = _lease(connection.pk + 1000)

    sessions = manage_client.get(URL).json()["exclusiveSessions"]

    assert [(s["requestCount"], s["active"]) for s in sessions] == [(4, False), (0, False)]
    assert sessions[1]["connectionName"] is None  # a connection routing does not know
    assert idle.connection_id == sessions[1]["connectionId"]


def test_sessions_page_and_filter(
    manage_client: APIClient, fresh_process_store: MemoryStore
) -> None:
    for connection_id in (301, 302, 303):
        _lease(connection_id)

    page = manage_client.get(URL, {"limit": 2, "offset": 1}).json()
    one = manage_client.get(URL, {"connectionId": 303}).json()

    assert page["total"] == 3
    assert [s["connectionId"] for s in page["exclusiveSessions"]] == [302, 303]
    assert [s["sessionId"] for s in one["exclusiveSessions"]] == ["lease:303"]
    assert manage_client.get(URL, {"provider": "anthropic"}).json()["total"] == 0
    assert manage_client.get(URL, {"provider": "openai"}).json()["total"] == 3
    assert manage_client.get(URL, {"connectionId": "x"}).status_code == 400
    for digits in ("\u00b2", "\u0663\u0660\u0663", "9" * 5000, "-303", "303.0"):
        assert manage_client.get(URL, {"connectionId": digits}).status_code == 400, digits


def test_revoke_ends_the_lease_with_the_operators_reason(
    manage_client: APIClient, fresh_process_store: MemoryStore
) -> None:
    row, other = _lease(401), _lease(402)

    response = manage_client.post(
        f"{URL}/lease:401/revoke", {"reason": "QUOTA_UNAVAILABLE"}, format="json"
    )
    again = manage_client.post(f"{URL}/lease:401/revoke")

    assert response.json() == {
        "revoked": True,
        "sessionId": "lease:401",
        "reason": "QUOTA_UNAVAILABLE",
    }
    row.refresh_from_db()
    assert (row.state, row.end_reason) == ("INVALIDATED", "QUOTA_UNAVAILABLE")
    assert again.status_code == 404
    assert ExclusiveConnectionLease.objects.get(pk=other.pk).state == "ACTIVE"
    listed = manage_client.get(URL).json()["exclusiveSessions"]
    assert [s["sessionId"] for s in listed] == ["lease:402"]


def test_revoke_defaults_to_authorization_changed(
    manage_client: APIClient, fresh_process_store: MemoryStore
) -> None:
    row = _lease(501)

    manage_client.post(f"{URL}/lease:501/revoke")

    row.refresh_from_db()
    assert row.end_reason == "AUTHORIZATION_CHANGED"  # the admin's default too


@pytest.mark.parametrize("reason", ["TTL_EXPIRED", "OWNER_EXIT", "NONSENSE"])
def test_revoke_refuses_a_reason_that_is_not_the_operators(
    manage_client: APIClient, reason: str
) -> None:
    row = _lease(601)

    response = manage_client.post(f"{URL}/lease:601/revoke", {"reason": reason}, format="json")

    assert response.status_code == 400
    assert ExclusiveConnectionLease.objects.get(pk=row.pk).state == "ACTIVE"


@pytest.mark.parametrize(
    "session",
    [
        "lease:999",
        "601",
        "lease:abc",
        "lease:0",
        "lease:0601",
        "lease:" + "9" * 5000,
        "lease:\u00b2",
    ],
)
def test_revoke_of_no_such_session_is_a_404(manage_client: APIClient, session: str) -> None:
    _lease(601)

    assert manage_client.post(f"{URL}/{session}/revoke").status_code == 404


def test_revoke_ends_only_the_session_named_even_when_it_moved_meanwhile(
    manage_client: APIClient, fresh_process_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = _lease(801)
    found = sessions.lease_on_connection

    def then_moved(**kwargs: Any) -> Any:  # a fail-over between the lookup and the revoke
        view = found(**kwargs)
        lease_transition(
            owner_hash=row.lease_owner_hash,
            generation=row.generation,
            api_key_id=row.api_key_id,
            provider="openai",
            connection_id=802,
            reason=EndReason.HEALTH_OR_COOLDOWN,
            now=timezone.now(),
        )
        return view

    monkeypatch.setattr(sessions, "lease_on_connection", then_moved)

    response = manage_client.post(f"{URL}/lease:801/revoke")

    assert response.status_code == 404  # lease:801 is no session any more
    assert ExclusiveConnectionLease.objects.get(connection_id=802).state == "ACTIVE"


def test_sessions_need_an_operator(api_client: APIClient) -> None:
    _lease(701)

    assert api_client.get(URL).status_code in (401, 403)
    assert api_client.post(f"{URL}/lease:701/revoke").status_code in (401, 403)
    assert ExclusiveConnectionLease.objects.get(connection_id=701).state == "ACTIVE"
