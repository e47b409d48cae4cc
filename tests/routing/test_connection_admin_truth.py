"""The connection admin tells the truth (issue 14): a passed cooldown reads "available", locked
models are listed, times show seconds, and the verbs are buttons on the change page."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings

from omniroute.core.admin import human_seconds
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.connection_state import BANNED, UNAVAILABLE, ConnectionState
from resilience.services.connections import connection_key
from resilience.services.lockout_operations import lockout_list
from routing.models import ProviderConnection
from routing.snapshot import snapshot_clear
from tests.databases import redis_prefix
from tests.resilience.lockout_support import lock

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


def _change_url(connection: ProviderConnection, verb: str = "") -> str:
    if not verb:
        return reverse("admin:routing_providerconnection_change", args=[connection.pk])
    return reverse(f"admin:routing_providerconnection_{verb}", args=[connection.pk])


def _set_live(store: StateStore, connection: ProviderConnection, state: ConnectionState) -> None:
    async_to_sync(store.set)(connection_key(connection.pk), state.to_dict())


def _row(page: bytes, connection: ProviderConnection) -> str:
    rows = [row for row in page.decode().split("<tr") if f">{connection.name}</a>" in row]
    assert len(rows) == 1
    return rows[0]


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _locked(store: StateStore) -> list[str]:
    return [view.model for view in async_to_sync(lockout_list)(store=store)]


# --- a passed cooldown is available -----------------------------------------------------------


def test_a_cooldown_that_has_passed_shows_available(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    passed = timezone.now().timestamp() - 5
    _set_live(live_store, connection, ConnectionState(UNAVAILABLE, rate_limited_until=passed))
    ProviderConnection.objects.filter(pk=connection.pk).update(test_status=UNAVAILABLE)

    row = _row(staff_client.get(CHANGELIST).content, connection)
    page = staff_client.get(_change_url(connection)).content.decode()

    assert ">available</span>" in row and ">cooling " not in row  # no "cooling 3 s" badge
    assert ">available</strong>" in page


def test_a_running_cooldown_still_shows_unavailable(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    until = timezone.now().timestamp() + 125
    _set_live(live_store, connection, ConnectionState(UNAVAILABLE, rate_limited_until=until))

    row = _row(staff_client.get(CHANGELIST).content, connection)

    assert ">cooling 2 min 5 s</span>" in row or ">cooling 2 min 4 s</span>" in row


# --- locked models ------------------------------------------------------------------------------


def test_locked_models_are_listed_on_the_list_and_the_change_page(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    lock(live_store, "mock", connection.pk, "gpt-4o", seconds=600)
    unlocked = ProviderConnection.objects.create(provider=connection.provider, name="spare")

    page = staff_client.get(CHANGELIST).content
    change = staff_client.get(_change_url(connection))

    row = _row(page, connection)
    assert ">locked 1 model</span>" in row  # the models and their time left on hover
    assert 'title="gpt-4o (10 min)"' in row or 'title="gpt-4o (9 min' in row
    assert "gpt-4o" not in _row(page, unlocked) and ">locked" not in _row(page, unlocked)
    assert [m.model for m in change.context["locked_models"]] == ["gpt-4o"]
    assert "<td>gpt-4o</td>" in change.content.decode()
    assert 'value="Unlock"' in change.content.decode()


# --- times to the second ------------------------------------------------------------------------


def test_times_render_with_seconds(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    at = dt.datetime(2026, 1, 31, 14, 5, 9, tzinfo=dt.UTC)
    ProviderConnection.objects.filter(pk=connection.pk).update(
        last_error_at=at, last_error="boom", test_status=UNAVAILABLE
    )
    shown = f"{timezone.localtime(at):%Y-%m-%d %H:%M:%S}"

    assert shown in _row(staff_client.get(CHANGELIST).content, connection)
    assert shown in staff_client.get(_change_url(connection)).content.decode()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "—"), (42, "42 s"), (600, "10 min"), (725, "12 min 5 s"), (11_107, "3 h 5 min 7 s")],
)
def test_durations_are_to_the_second(seconds: int, text: str) -> None:
    assert human_seconds(seconds) == text


# --- the verbs as buttons -----------------------------------------------------------------------


def test_the_change_page_has_the_three_buttons(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    lock(live_store, "mock", connection.pk, "gpt-4o", seconds=600)

    page = staff_client.get(_change_url(connection)).content.decode()

    for verb in ("clear_cooldown", "reset_terminal", "unlock"):
        assert f'action="{_change_url(connection, verb)}"' in page
    assert ">Clear cooldown</button>" in page and ">Reset terminal state</button>" in page
    assert page.count("csrfmiddlewaretoken") >= 4  # the change form and each button's form


def test_clear_cooldown_button(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    until = timezone.now().timestamp() + 600
    _set_live(live_store, connection, ConnectionState(UNAVAILABLE, rate_limited_until=until))

    response = staff_client.post(_change_url(connection, "clear_cooldown"))

    assert response.status_code == 302 and response["Location"] == _change_url(connection)
    assert async_to_sync(live_store.get)(connection_key(connection.pk)) is None
    assert _messages(response) == ["Cleared cooldown and errors of 1 connection(s)."]


def test_reset_terminal_button(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    _set_live(live_store, connection, ConnectionState(BANNED, last_error="forbidden"))
    ProviderConnection.objects.filter(pk=connection.pk).update(test_status=BANNED)

    response = staff_client.post(_change_url(connection, "reset_terminal"))

    assert response.status_code == 302 and response["Location"] == _change_url(connection)
    assert ProviderConnection.objects.get(pk=connection.pk).test_status == "active"
    assert async_to_sync(live_store.get)(connection_key(connection.pk)) is None
    assert _messages(response) == ["Reset the terminal state of 1 connection(s)."]


def test_unlock_button_unlocks_only_that_model_on_that_connection(
    staff_client: Client, live_store: StateStore, connection: ProviderConnection
) -> None:
    other = ProviderConnection.objects.create(provider=connection.provider, name="other")
    lock(live_store, "mock", connection.pk, "gpt-4o", seconds=600)
    lock(live_store, "mock", connection.pk, "o3", seconds=600)
    lock(live_store, "mock", other.pk, "gpt-4o", seconds=600)

    response = staff_client.post(_change_url(connection, "unlock"), {"model": "gpt-4o"})

    assert response.status_code == 302 and response["Location"] == _change_url(connection)
    assert sorted(_locked(live_store)) == ["gpt-4o", "o3"]  # other's gpt-4o and this one's o3
    assert _messages(response) == ["Unlocked gpt-4o on primary: 1 lock(s) removed."]


def test_buttons_take_post_and_the_change_permission(
    django_user_model: Any, live_store: StateStore, connection: ProviderConnection
) -> None:
    viewer = django_user_model.objects.create_user("viewer", password=None, is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_providerconnection"))
    client = Client()
    client.force_login(viewer)
    _set_live(live_store, connection, ConnectionState(BANNED))

    page = client.get(_change_url(connection)).content.decode()

    assert ">Reset terminal state<" not in page  # no buttons for a viewer
    for verb in ("clear_cooldown", "reset_terminal", "unlock"):
        assert client.post(_change_url(connection, verb)).status_code == 403
    assert client.get(_change_url(connection, "reset_terminal")).status_code == 405
    assert async_to_sync(live_store.get)(connection_key(connection.pk)) is not None


def test_a_button_for_a_missing_connection_is_a_404(staff_client: Client) -> None:
    url = reverse("admin:routing_providerconnection_clear_cooldown", args=[999_999])

    assert staff_client.post(url).status_code == 404
