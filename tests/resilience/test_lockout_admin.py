"""The "Model cooldowns" admin page: the live locks from the state store, and unlock."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from omniroute.core.store import StateStore
from resilience.domain.lockout import LockScope
from resilience.services.lockout_operations import lockout_list
from tests.resilience.lockout_support import connection, lock

pytestmark = pytest.mark.django_db

PAGE = reverse("admin:resilience_modelcooldown_changelist")
UNLOCK = reverse("admin:resilience_modelcooldown_unlock")


def _listed(store: StateStore) -> list[tuple[str, int, str]]:
    views = async_to_sync(lockout_list)(store=store)
    return sorted((v.provider, v.connection_id, v.model) for v in views)


def _messages(response: Any) -> list[tuple[int, str]]:
    return [(m.level, str(m)) for m in get_messages(response.wsgi_request)]


def _staff(django_user_model: Any, *perms: str) -> Client:
    user = django_user_model.objects.create_user("ops", password=None, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=perms))
    client = Client()
    client.force_login(user)
    return client


def test_page_lists_the_locks_with_unlock_buttons(
    staff_client: Client, process_store: StateStore
) -> None:
    main = connection("openai", "Main account")
    start = dt.datetime(2025, 1, 6, 12, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False) as traveller:  # the store's clock is time.time
        lock(process_store, "openai", main, "gpt-4o", seconds=600)
        lock(process_store, "openai", main, "O3-Mini", scope=LockScope.EXACT)
        traveller.shift(15)
        response = staff_client.get(PAGE)

    assert response.status_code == 200
    page = response.content.decode()
    assert [row.model for row in response.context["rows"]] == ["gpt-4o", "o3-mini"]
    assert f'Main account <span class="quiet">#{main}</span>' in page
    assert 'o3-mini <span class="quiet">(exact)</span>' in page
    assert ">9 min 45 s<" in page and ">1 min 45 s<" in page  # remaining, to the second
    expires = timezone.localtime(start + dt.timedelta(minutes=10))
    assert f">{expires:%Y-%m-%d %H:%M:%S}<" in page
    assert page.count('value="Unlock"') == 2
    assert 'value="Unlock all"' in page
    assert "csrfmiddlewaretoken" in page


def test_page_with_nothing_locked(staff_client: Client, process_store: StateStore) -> None:
    page = staff_client.get(PAGE).content.decode()
    assert "No model is locked." in page
    assert 'value="Unlock all"' not in page


def test_unlock_removes_one_lock(staff_client: Client, process_store: StateStore) -> None:
    first, second = connection("openai", "a"), connection("openai", "b")
    for conn in (first, second):
        lock(process_store, "openai", conn, "gpt-4o")

    response = staff_client.post(
        UNLOCK, {"provider": "openai", "model": "gpt-4o", "connection_id": first}, follow=True
    )

    assert response.redirect_chain == [(PAGE, 302)]
    assert _listed(process_store) == [("openai", second, "gpt-4o")]
    assert _messages(response) == [
        (messages.SUCCESS, f"Unlocked gpt-4o (openai, connection {first}): 1 lock(s) removed.")
    ]
    assert [row.connection_id for row in response.context["rows"]] == [second]


def test_unlock_all(staff_client: Client, process_store: StateStore) -> None:
    lock(process_store, "openai", 1, "gpt-4o")
    lock(process_store, "anthropic", 2, "claude")

    response = staff_client.post(UNLOCK, {"all": "1"}, follow=True)

    assert _listed(process_store) == []
    assert _messages(response) == [(messages.SUCCESS, "Removed every model lock.")]


def test_unlock_without_a_model_changes_nothing(
    staff_client: Client, process_store: StateStore
) -> None:
    lock(process_store, "openai", 1, "gpt-4o")

    response = staff_client.post(UNLOCK, {"provider": "openai"}, follow=True)

    assert _listed(process_store) == [("openai", 1, "gpt-4o")]
    assert _messages(response)[0][0] == messages.ERROR


def test_unlock_is_post_only(staff_client: Client, process_store: StateStore) -> None:
    assert staff_client.get(UNLOCK, {"all": "1"}).status_code == 405


def test_unlock_needs_the_csrf_token(django_user_model: Any, process_store: StateStore) -> None:
    user = django_user_model.objects.create_superuser("root", "root@example.com", password=None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    lock(process_store, "openai", 1, "gpt-4o")

    assert client.post(UNLOCK, {"all": "1"}).status_code == 403
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


def test_non_staff_never_reach_the_page(django_user_model: Any, process_store: StateStore) -> None:
    user = django_user_model.objects.create_user("visitor", password=None)
    client = Client()
    client.force_login(user)
    lock(process_store, "openai", 1, "gpt-4o")

    for response in (client.get(PAGE), client.post(UNLOCK, {"all": "1"})):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


def test_staff_without_the_permission_gets_403(
    django_user_model: Any, process_store: StateStore
) -> None:
    client = _staff(django_user_model, "change_resiliencesettings")
    lock(process_store, "openai", 1, "gpt-4o")

    assert client.get(PAGE).status_code == 403
    assert client.post(UNLOCK, {"all": "1"}).status_code == 403
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


def test_view_permission_shows_the_page_without_unlock(
    django_user_model: Any, process_store: StateStore
) -> None:
    client = _staff(django_user_model, "view_modelcooldown")
    lock(process_store, "openai", 1, "gpt-4o")

    page = client.get(PAGE).content.decode()

    assert "gpt-4o" in page
    assert 'value="Unlock' not in page
    assert client.post(UNLOCK, {"all": "1"}).status_code == 403
    assert _listed(process_store) == [("openai", 1, "gpt-4o")]


def test_change_permission_can_unlock(django_user_model: Any, process_store: StateStore) -> None:
    client = _staff(django_user_model, "change_modelcooldown")
    lock(process_store, "openai", 1, "gpt-4o")

    assert client.post(UNLOCK, {"all": "1"}).status_code == 302
    assert _listed(process_store) == []


def test_the_admin_index_links_the_page_and_offers_no_add(staff_client: Client) -> None:
    page = staff_client.get(reverse("admin:index")).content.decode()
    assert f'href="{PAGE}"' in page
    assert "Model cooldowns" in page
    assert f'href="{PAGE}add/"' not in page
