"""The API and the admin show a connection's live state (the state store's record, which is
authoritative) while its row, the durable copy, still lags behind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.connection_state import BANNED, CLEAN, UNAVAILABLE, ConnectionState
from resilience.services.connections import connection_key
from routing.models import ProviderConnection
from routing.selectors import (
    connection_state_columns,
    connection_state_durable,
    connection_states_live,
)
from routing.services import connection_save
from tests.databases import redis_prefix

pytestmark = pytest.mark.django_db

FAILED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC).timestamp()
BANNED_LIVE = ConnectionState(
    test_status=BANNED,
    backoff_level=3,
    last_error="account suspended",
    last_error_at=FAILED_AT,
    last_error_type="permanent",
    error_code="403",
)


@pytest.fixture
def live_store(settings: Settings) -> Iterator[StateStore]:
    """The process-wide store (``get_store()``), fresh and on a prefix of its own."""
    settings.REDIS_PREFIX = redis_prefix()
    get_store.cache_clear()
    store = get_store()
    yield store
    async_to_sync(store.clear_prefix)("")
    get_store.cache_clear()


def _mark_live(store: StateStore, connection: ProviderConnection, state: ConnectionState) -> None:
    """``state`` in the store only, as right after a failure: the row still says active."""
    async_to_sync(store.set)(connection_key(connection.pk), state.to_dict())
    assert ProviderConnection.objects.get(pk=connection.pk).test_status == "active"


def _cooling(seconds: float) -> ConnectionState:
    until = timezone.now().timestamp() + seconds
    return ConnectionState(
        test_status=UNAVAILABLE, rate_limited_until=until, backoff_level=1, error_code="429"
    )


def _sibling(connection: ProviderConnection, name: str) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(), fields={"provider": connection.provider, "name": name}
    )


# --- the conversions ----------------------------------------------------------------------------


def test_row_columns_and_state_convert_both_ways(connection: ProviderConnection) -> None:
    for name, value in connection_state_columns(BANNED_LIVE).items():
        setattr(connection, name, value)

    assert connection_state_durable(connection) == BANNED_LIVE
    assert connection.last_error_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_row_with_nothing_to_clear_is_the_clean_state_itself(
    connection: ProviderConnection,
) -> None:
    assert connection_state_durable(connection) is CLEAN  # its is_clean is one identity check
    connection.backoff_level = 1
    assert connection_state_durable(connection) is not CLEAN
    assert not connection_state_durable(connection).is_clean


def test_live_states_fall_back_to_the_row(
    live_store: StateStore, connection: ProviderConnection
) -> None:
    quiet = _sibling(connection, "quiet")
    ProviderConnection.objects.filter(pk=quiet.pk).update(test_status="expired")
    quiet.refresh_from_db()
    _mark_live(live_store, connection, BANNED_LIVE)

    states = connection_states_live([connection, quiet])

    assert states == {connection.pk: BANNED_LIVE, quiet.pk: ConnectionState(test_status="expired")}
    assert connection_states_live([]) == {}


# --- the management API -------------------------------------------------------------------------


def test_api_detail_shows_the_live_state(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark_live(live_store, connection, BANNED_LIVE)

    body = manage_client.get(f"/api/connections/{connection.pk}/").json()

    assert (body["test_status"], body["backoff_level"]) == ("banned", 3)
    assert (body["last_error"], body["last_error_type"], body["error_code"]) == (
        "account suspended",
        "permanent",
        "403",
    )
    assert datetime.fromisoformat(body["last_error_at"]).timestamp() == FAILED_AT
    assert (body["rate_limited_until"], body["cooldown_remaining_seconds"]) == (None, 0)


def test_api_list_shows_each_live_state(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    clean = _sibling(connection, "clean")
    _mark_live(live_store, connection, _cooling(300))

    items = {c["id"]: c for c in manage_client.get("/api/connections/").json()["results"]}

    cooling = items[connection.pk]
    assert (cooling["test_status"], cooling["error_code"]) == ("unavailable", "429")
    assert 290 < cooling["cooldown_remaining_seconds"] <= 300
    assert datetime.fromisoformat(cooling["rate_limited_until"]) > timezone.now()
    assert (items[clean.pk]["test_status"], items[clean.pk]["rate_limited_until"]) == (
        "active",
        None,
    )


def test_api_reset_terminal_refusal_names_the_live_status(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark_live(live_store, connection, _cooling(60))

    response = manage_client.post(f"/api/connections/{connection.pk}/reset_terminal/")

    assert response.status_code == 409
    assert response.json()["error"]["message"] == "The connection is unavailable, not terminal."


def test_api_shows_the_row_when_the_store_has_no_record(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    ProviderConnection.objects.filter(pk=connection.pk).update(
        test_status="credits_exhausted", error_code="402"
    )

    body = manage_client.get(f"/api/connections/{connection.pk}/").json()

    assert (body["test_status"], body["error_code"]) == ("credits_exhausted", "402")


# --- the admin ----------------------------------------------------------------------------------


def test_admin_change_page_shows_the_live_state(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark_live(live_store, connection, BANNED_LIVE)
    url = reverse("admin:routing_providerconnection_change", args=[connection.pk])

    page = staff_client.get(url).content.decode()

    assert ">banned</strong>" in page
    assert "account suspended" in page
    assert ">permanent<" in page and ">403<" in page


def test_admin_changelist_shows_the_live_state(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    clean = _sibling(connection, "clean")
    _mark_live(live_store, connection, _cooling(600))

    page = staff_client.get(reverse("admin:routing_providerconnection_changelist")).content
    rows = {
        name: row
        for row in page.decode().split("<tr")
        for name in (connection.name, clean.name)
        if f">{name}</a>" in row
    }

    assert ">cooling 10 min</span>" in rows[connection.name] or (
        ">cooling 9 min" in rows[connection.name]
    )
    assert ">available</span>" in rows[clean.name]
