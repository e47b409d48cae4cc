"""The leases admin: a read-only list (owner hash prefix only), filters, search, and the revoke
action, which ends leases through the lease service."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib import messages
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from leases.domain.states import EndReason, LeaseOutcome
from leases.models import ExclusiveConnectionLease
from leases.services import lease_release, lease_transition
from tests.leases.support import KEY, acquire, new_owner_hash

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:leases_exclusiveconnectionlease_changelist")


def _messages(response: Any) -> list[tuple[int, str]]:
    return [(m.level, str(m)) for m in get_messages(response.wsgi_request)]


def _lease(connection_id: int, owner: str | None = None, **kwargs: Any) -> ExclusiveConnectionLease:
    kwargs.setdefault("now", timezone.now())
    result = acquire(owner or new_owner_hash(), connection_id=connection_id, **kwargs)
    assert result.lease is not None
    return ExclusiveConnectionLease.objects.get(pk=result.lease.id)


def test_the_list_shows_leases_with_only_an_owner_hash_prefix(staff_client: Client) -> None:
    rows = [_lease(101, api_key_id=7), _lease(102, provider="anthropic")]

    response = staff_client.get(CHANGELIST)

    assert response.status_code == 200
    page = response.content.decode()
    for row in rows:
        assert f"{row.lease_owner_hash[:12]}…" in page
        assert row.lease_owner_hash not in page
    assert ">101<" in page and ">102<" in page and "anthropic" in page


def test_an_expired_row_not_yet_marked_says_so(staff_client: Client) -> None:
    _lease(5, now=timezone.now() - dt.timedelta(hours=1))

    page = staff_client.get(CHANGELIST).content.decode()

    assert "ACTIVE (expired, ends at the next lease operation)" in page


def test_filter_by_state_and_search_by_connection(staff_client: Client) -> None:
    owner = new_owner_hash()
    released = _lease(201, owner=owner)
    lease_release(
        owner_hash=owner, generation=1, api_key_id=KEY, now=timezone.now()
    )  # connection 201 is free again
    active = _lease(202)

    by_state = staff_client.get(CHANGELIST, {"state__exact": "RELEASED"})
    by_connection = staff_client.get(CHANGELIST, {"q": "202"})
    nonsense = staff_client.get(CHANGELIST, {"q": "not-a-number"})

    assert list(by_state.context["cl"].result_list) == [
        ExclusiveConnectionLease.objects.get(pk=released.pk)
    ]
    assert list(by_connection.context["cl"].result_list) == [active]
    assert nonsense.status_code == 200 and list(nonsense.context["cl"].result_list) == []


def test_the_detail_page_is_read_only_and_hides_the_owner_hash(staff_client: Client) -> None:
    row = _lease(301)
    url = reverse("admin:leases_exclusiveconnectionlease_change", args=[row.pk])

    response = staff_client.get(url)
    post = staff_client.post(url, {"generation": 9, "state": "RELEASED"})

    assert response.status_code == 200
    page = response.content.decode()
    assert row.lease_owner_hash not in page and row.lease_owner_hash[:12] in page
    assert 'name="_save"' not in page
    assert post.status_code == 403
    assert ExclusiveConnectionLease.objects.get(pk=row.pk).state == "ACTIVE"


def test_nothing_is_added_or_deleted_by_hand(staff_client: Client) -> None:
    row = _lease(401)

    add = staff_client.get(reverse("admin:leases_exclusiveconnectionlease_add"))
    delete = staff_client.post(
        reverse("admin:leases_exclusiveconnectionlease_delete", args=[row.pk]), {"post": "yes"}
    )

    assert add.status_code == delete.status_code == 403
    assert ExclusiveConnectionLease.objects.filter(pk=row.pk).exists()


def test_revoke_invalidates_the_active_leases_through_the_service(staff_client: Client) -> None:
    owner = new_owner_hash()
    ended = _lease(501, owner=owner)
    lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=timezone.now())
    active, other = _lease(502), _lease(503)

    response = staff_client.post(
        CHANGELIST,
        {"action": "revoke_leases", "_selected_action": [ended.pk, active.pk]},
        follow=True,
    )

    assert _messages(response) == [
        (
            messages.INFO,
            "Revoked 1 lease(s) (AUTHORIZATION_CHANGED). "
            "1 selected lease(s) were no longer active.",
        )
    ]
    states = dict(ExclusiveConnectionLease.objects.values_list("pk", "state"))
    assert states == {ended.pk: "RELEASED", active.pk: "INVALIDATED", other.pk: "ACTIVE"}
    revoked = ExclusiveConnectionLease.objects.get(pk=active.pk)
    assert revoked.end_reason == "AUTHORIZATION_CHANGED" and revoked.ended_at is not None
    again = acquire(active.lease_owner_hash, connection_id=502, now=timezone.now())
    assert again.outcome is LeaseOutcome.ACQUIRED and again.lease is not None
    assert again.lease.generation == 2  # the revoked generation is never valid again


def test_revoking_an_ended_row_leaves_the_owners_lease_on_another_connection(
    staff_client: Client,
) -> None:
    owner = new_owner_hash()
    first = _lease(511, owner=owner)
    moved = lease_transition(
        owner_hash=owner,
        generation=first.generation,
        api_key_id=first.api_key_id,
        provider="openai",
        connection_id=512,
        reason=EndReason.HEALTH_OR_COOLDOWN,
        now=timezone.now(),
    )
    assert moved.outcome is LeaseOutcome.TRANSITIONED  # same owner, generation and key

    response = staff_client.post(
        CHANGELIST, {"action": "revoke_leases", "_selected_action": [first.pk]}, follow=True
    )

    live = ExclusiveConnectionLease.objects.get(connection_id=512)
    assert live.state == "ACTIVE"  # the ended row named it by owner, generation and key
    assert _messages(response) == [
        (
            messages.INFO,
            "Revoked 0 lease(s) (AUTHORIZATION_CHANGED). "
            "1 selected lease(s) were no longer active.",
        )
    ]


def test_revoke_records_the_reason_the_operator_picked(staff_client: Client) -> None:
    row = _lease(601)

    staff_client.post(
        CHANGELIST,
        {"action": "revoke_leases", "_selected_action": [row.pk], "reason": "QUOTA_UNAVAILABLE"},
    )

    assert ExclusiveConnectionLease.objects.get(pk=row.pk).end_reason == "QUOTA_UNAVAILABLE"


@pytest.mark.parametrize("reason", ["TTL_EXPIRED", "OWNER_EXIT", "NONSENSE"])
def test_revoke_refuses_a_reason_that_is_not_the_operators(
    staff_client: Client, reason: str
) -> None:
    row = _lease(701)

    response = staff_client.post(
        CHANGELIST,
        {"action": "revoke_leases", "_selected_action": [row.pk], "reason": reason},
        follow=True,
    )

    assert response.status_code == 200
    assert not any("Revoked" in text for _, text in _messages(response))
    assert ExclusiveConnectionLease.objects.get(pk=row.pk).state == "ACTIVE"


def test_a_viewer_cannot_revoke(django_user_model: Any) -> None:
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_exclusiveconnectionlease"))
    client = Client()
    client.force_login(viewer)
    row = _lease(801)

    listing = client.get(CHANGELIST)
    client.post(CHANGELIST, {"action": "revoke_leases", "_selected_action": [row.pk]})

    assert listing.status_code == 200 and "revoke_leases" not in listing.content.decode()
    assert ExclusiveConnectionLease.objects.get(pk=row.pk).state == "ACTIVE"
