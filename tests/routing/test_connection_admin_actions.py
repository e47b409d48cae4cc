"""Operator actions on connections: clear cooldown, reset terminal state (row AND live store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from omniroute.core import tasks
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.connection_state import BANNED, EXPIRED, UNAVAILABLE, ConnectionState
from resilience.persistence import persist_connection_state
from resilience.services.connections import connection_key, connection_state_get
from resilience.services.streaks import streak_record_refusal
from routing.domain.config.vocabulary import TestStatus as Status
from routing.models import Provider, ProviderConnection
from routing.services import connection_clear_error, connection_reset_terminal, connection_save
from routing.snapshot import snapshot_clear
from tests.databases import redis_prefix
from tests.routing.conftest import seeded_provider

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:routing_providerconnection_changelist")


@pytest.fixture
def live_store(settings: Settings) -> Iterator[StateStore]:
    """The process-wide store (``get_store()``), fresh and on a prefix of its own."""
    settings.REDIS_PREFIX = redis_prefix()
    get_store.cache_clear()
    snapshot_clear()
    store = get_store()
    yield store
    async_to_sync(store.clear_prefix)("")
    get_store.cache_clear()


def _other(provider: Provider, name: str) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(), fields={"provider": provider, "name": name}
    )


def _mark(store: StateStore, connection: ProviderConnection, state: ConnectionState) -> None:
    """``state`` both live in the store and on the row, as the gateway leaves it."""
    async_to_sync(store.set)(connection_key(connection.pk), state.to_dict())
    ProviderConnection.objects.filter(pk=connection.pk).update(
        test_status=state.test_status,
        rate_limited_until=timezone.now() + timedelta(minutes=5)
        if state.rate_limited_until
        else None,
        last_error=state.last_error,
        error_code=state.error_code,
        backoff_level=state.backoff_level,
    )
    connection.refresh_from_db()


def _durable(connection: ProviderConnection) -> ConnectionState:
    """The row's state as the snapshot would read it."""
    connection.refresh_from_db()
    until = connection.rate_limited_until
    return ConnectionState(
        test_status=connection.test_status,
        rate_limited_until=until.timestamp() if until else None,
        backoff_level=connection.backoff_level,
        last_error=connection.last_error,
        error_code=connection.error_code,
    )


def _live(store: StateStore, connection: ProviderConnection) -> ConnectionState:
    get = async_to_sync(connection_state_get)
    return get(store=store, connection_id=connection.pk, durable=_durable(connection))


def _routable(store: StateStore, connection: ProviderConnection) -> bool:
    return _live(store, connection).is_eligible(timezone.now().timestamp())


def _has_record(store: StateStore, connection: ProviderConnection) -> bool:
    return async_to_sync(store.get)(connection_key(connection.pk)) is not None


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


BANNED_STATE = ConnectionState(test_status=BANNED, last_error="forbidden", error_code="403")
COOLING_STATE = ConnectionState(
    test_status=UNAVAILABLE, rate_limited_until=4e9, backoff_level=2, error_code="429"
)


# --- clear cooldown ---------------------------------------------------------------------------


def test_clear_cooldown_action_clears_row_and_store(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark(live_store, connection, COOLING_STATE)
    async_to_sync(streak_record_refusal)(store=live_store, connection_id=connection.pk)
    assert not _routable(live_store, connection)

    response = staff_client.post(
        CHANGELIST, {"action": "clear_errors", "_selected_action": [connection.pk]}, follow=True
    )

    assert "Cleared cooldown and errors of 1 connection(s)." in _messages(response)
    assert not _has_record(live_store, connection)
    assert async_to_sync(live_store.get)(f"streak:{connection.pk}") is None  # streak ended too
    assert _durable(connection) == ConnectionState()
    assert _routable(live_store, connection)


def test_clear_error_resets_expired_retries(
    live_store: StateStore, connection: ProviderConnection
) -> None:
    ProviderConnection.objects.filter(pk=connection.pk).update(
        test_status=EXPIRED, expired_retry_count=3, expired_retry_at=timezone.now()
    )
    connection.refresh_from_db()

    connection_clear_error(connection=connection)

    connection.refresh_from_db()
    assert (connection.expired_retry_count, connection.expired_retry_at) == (0, None)


# --- reset terminal state ---------------------------------------------------------------------


def test_reset_terminal_action_resets_only_terminal_connections(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    cooling = _other(connection.provider, "cooling")
    _mark(live_store, connection, BANNED_STATE)
    _mark(live_store, cooling, COOLING_STATE)

    response = staff_client.post(
        CHANGELIST,
        {"action": "reset_terminal", "_selected_action": [connection.pk, cooling.pk]},
        follow=True,
    )

    assert _messages(response) == [
        "Reset the terminal state of 1 connection(s). "
        "1 were not in a terminal state and were left as they are."
    ]
    assert _routable(live_store, connection)
    assert _durable(connection) == ConnectionState()
    assert not _has_record(live_store, connection)
    assert _has_record(live_store, cooling)  # a cooldown is not the terminal reset's business
    assert _durable(cooling).test_status == UNAVAILABLE


def test_reset_terminal_action_with_nothing_terminal_warns(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    response = staff_client.post(
        CHANGELIST, {"action": "reset_terminal", "_selected_action": [connection.pk]}, follow=True
    )

    messages = list(get_messages(response.wsgi_request))
    assert [m.level_tag for m in messages] == ["warning"]
    assert str(messages[0]).startswith("Reset the terminal state of 0 connection(s).")


@pytest.mark.parametrize("status", ["banned", "expired", "credits_exhausted"])
def test_reset_terminal_service(
    live_store: StateStore, connection: ProviderConnection, status: str
) -> None:
    _mark(live_store, connection, ConnectionState(test_status=status, last_error="x"))

    assert connection_reset_terminal(connection=connection) is True

    assert _durable(connection) == ConnectionState()
    assert _routable(live_store, connection)


def test_reset_terminal_sees_a_live_state_the_row_does_not_show_yet(
    live_store: StateStore, connection: ProviderConnection
) -> None:
    # the store says expired; its write-through to the row has not run yet
    async_to_sync(live_store.set)(
        connection_key(connection.pk), ConnectionState(test_status=EXPIRED).to_dict()
    )

    assert connection_reset_terminal(connection=connection) is True

    assert not _has_record(live_store, connection)
    assert _routable(live_store, connection)


def test_reset_terminal_is_a_no_op_for_a_non_terminal_connection(
    live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark(live_store, connection, COOLING_STATE)
    before = ProviderConnection.objects.get(pk=connection.pk).updated_at

    assert connection_reset_terminal(connection=connection) is False

    assert ProviderConnection.objects.get(pk=connection.pk).updated_at == before
    assert _live(live_store, connection) == COOLING_STATE


# --- API ----------------------------------------------------------------------------------------


def test_api_reset_terminal(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark(live_store, connection, BANNED_STATE)
    url = f"/api/connections/{connection.pk}/reset_terminal/"

    body = manage_client.post(url).json()

    assert (body["test_status"], body["last_error"], body["error_code"]) == ("active", "", "")
    assert _routable(live_store, connection)

    again = manage_client.post(url)
    assert again.status_code == 409
    assert again.json()["error"] == {
        "type": "api_error",
        "code": "conflict",
        "message": "The connection is active, not terminal.",
    }


def test_api_clear_error_clears_the_store(
    manage_client: APIClient, live_store: StateStore, connection: ProviderConnection
) -> None:
    _mark(live_store, connection, COOLING_STATE)

    response = manage_client.post(f"/api/connections/{connection.pk}/clear_error/")

    assert response.status_code == 200
    assert _routable(live_store, connection)


# --- the queued write-through never lands after the clear ---------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_clear_waits_for_the_queued_write_through(
    live_store: StateStore, provider: Provider
) -> None:
    connection = await database_sync_to_async(_other)(provider, "racing")
    persist_connection_state(connection.pk, BANNED_STATE)  # queued, not yet run

    await database_sync_to_async(connection_clear_error, thread_sensitive=False)(
        connection=connection
    )
    await tasks.flush()

    row = await ProviderConnection.objects.aget(pk=connection.pk)
    assert (row.test_status, row.last_error) == ("active", "")


@pytest.mark.django_db(transaction=True)
def test_new_credentials_lift_a_terminal_state() -> None:
    provider = seeded_provider("mock")
    connection = connection_save(
        connection=ProviderConnection(),
        fields={"provider": provider, "name": "renewed"},
        secret="sk-old-0000000000",
    )
    connection.test_status = Status.EXPIRED
    connection.save(update_fields=["test_status"])

    connection_save(connection=connection, secret="sk-new-1111111111")

    connection.refresh_from_db()
    assert connection.test_status == Status.ACTIVE
    assert connection.get_secret() == "sk-new-1111111111"
