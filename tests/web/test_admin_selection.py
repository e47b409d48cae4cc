"""What a forged admin form can send: an action's selection holding an id that names no row.

Every admin of the site (the project's, and Django's user and group admins, which the site
registers again on the project's base) is posted each of its actions with such a selection:
the lookup raised, a 500 for every one of them. It now changes nothing and says why
(omniroute/core/admin.py, ``BoundedAdmin``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from omniroute.core.admin import BoundedAdmin

pytestmark = pytest.mark.django_db

NOT_IDS = ["abc", "9" * 30, "1\x00", str(2**63)]
INTEGER_KEYS = {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField"}
REFUSED = "The selection holds an id that names no item. No items have been changed."


def _actions(client: Client, url: str) -> list[str]:
    page = client.get(url)
    if page.status_code == 302:  # a singleton's list goes to its one page: no actions
        return []
    assert page.status_code == 200
    form = page.context.get("action_form")  # None, or absent, for an admin without actions
    return [name for name, _ in form.fields["action"].choices if name] if form else []


def test_every_admin_is_on_the_bounded_base() -> None:
    reverse("admin:index")  # the site's URLs are built, and the stock admins registered again
    assert all(isinstance(each, BoundedAdmin) for each in admin.site._registry.values())


@pytest.mark.parametrize("not_id", NOT_IDS, ids=["word", "30-digits", "nul", "2**63"])
def test_a_selection_naming_no_row_changes_nothing_and_says_why(
    staff_client: Client, not_id: str
) -> None:
    reverse("admin:index")
    tried: set[tuple[str, str]] = set()
    for model in list(admin.site._registry):
        key = model._meta.pk
        if "\x00" not in not_id and key.get_internal_type() not in INTEGER_KEYS:
            continue  # a word or a long number can be a text key
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for action in _actions(staff_client, url):
            response = staff_client.post(
                url, {"action": action, "_selected_action": ["1", not_id], "index": "0"}
            )
            assert response.status_code == 302, (url, action)
            messages = [str(m) for m in get_messages(response.wsgi_request)]
            assert REFUSED in messages, (url, action)
            tried.add((str(model._meta.model_name), action))
    # Django's own admins and the project's, their delete and their own actions, were all tried
    assert {
        ("user", "delete_selected"),
        ("group", "delete_selected"),
        ("providerconnection", "clear_errors"),
        ("providererrorrule", "enable_rules"),
    } <= tried
    assert User.objects.filter(username="root").exists()  # the users' delete did not run


def test_a_real_selection_still_acts(staff_client: Client, django_user_model: Any) -> None:
    other = django_user_model.objects.create_user("other", password=None)
    url = reverse("admin:auth_user_changelist")

    response = staff_client.post(
        url, {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"}
    )

    assert response.status_code == 302
    assert not django_user_model.objects.filter(pk=other.pk).exists()


def test_the_user_admins_search_is_bounded(staff_client: Client) -> None:
    response = staff_client.get(reverse("admin:auth_user_changelist"), {"q": "_" * 30_000})

    assert response.status_code == 200
    assert "A search is at most 1000 characters." in [
        str(m) for m in get_messages(response.wsgi_request)
    ]
