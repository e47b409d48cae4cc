"""The managed-key policy: a key with ``lease:exclusive`` names its
connections (service, management API, admin form); a managed key that stops authenticating or
loses the scope ends its leases, as does a connection that is deleted or disabled; the managed
connections reach the snapshot and leave ordinary pools."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from leases.domain.states import EndReason, LeaseState
from leases.models import ExclusiveConnectionLease
from leases.services import lease_acquire
from routing.domain.config.vocabulary import Scope
from routing.domain.plan.planning import plan_route
from routing.models import ClientApiKey, ProviderConnection
from routing.selectors import config_snapshot_build
from routing.services import (
    api_key_create,
    api_key_delete,
    api_key_revoke,
    api_key_update,
    connection_delete,
    connection_save,
)
from routing.services.keys import LEASE_KEY_POLICY_INVALID
from tests.routing.lease_support import OWNER, hashed, managed_key

pytestmark = pytest.mark.django_db

POLICY_MESSAGE = re.compile("requires explicit allowedConnections")


def leased(key_id: int, connection: ProviderConnection) -> int:
    """An active lease of ``OWNER`` through the key on ``connection``; its row id."""
    result = lease_acquire(
        owner_hash=hashed(OWNER),
        api_key_id=key_id,
        provider=connection.provider_id,
        connection_id=connection.pk,
    )
    assert result.lease is not None
    return result.lease.id


def row(lease_id: int) -> ExclusiveConnectionLease:
    return ExclusiveConnectionLease.objects.get(pk=lease_id)


# --- the policy, in each place a key is written ----------------------------------------------


def test_the_service_refuses_a_managed_key_without_connections() -> None:
    with pytest.raises(ValidationError) as raised:
        api_key_create(name="m", scopes=[Scope.LEASE_EXCLUSIVE])
    assert POLICY_MESSAGE.search(str(raised.value))
    assert not ClientApiKey.objects.exists()


def test_the_service_refuses_an_update_that_leaves_a_managed_key_without_connections(
    connection: ProviderConnection,
) -> None:
    key_id, _ = managed_key([connection.pk])
    key = ClientApiKey.objects.get(pk=key_id)
    with pytest.raises(ValidationError, match="requires explicit allowedConnections"):
        api_key_update(key=key, fields={}, allowed_connections=[])
    plain, _ = api_key_create(name="plain")
    with pytest.raises(ValidationError, match="requires explicit allowedConnections"):
        api_key_update(key=plain, fields={"scopes": [Scope.LEASE_EXCLUSIVE]})
    assert list(ClientApiKey.objects.get(pk=key_id).allowed_connections.all()) == [connection]


def test_the_api_answers_400_lease_key_policy_invalid(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    payload: dict[str, Any] = {"name": "m", "scopes": [Scope.LEASE_EXCLUSIVE.value]}
    created = manage_client.post("/api/keys/", payload, format="json")
    assert created.status_code == 400
    error = created.json()["error"]
    assert error["code"] == LEASE_KEY_POLICY_INVALID
    assert POLICY_MESSAGE.search(error["message"])
    key_id, _ = managed_key([connection.pk])
    patched = manage_client.patch(
        f"/api/keys/{key_id}/", {"allowed_connections": []}, format="json"
    )
    assert (patched.status_code, patched.json()["error"]["code"]) == (400, LEASE_KEY_POLICY_INVALID)
    payload["allowed_connections"] = [connection.pk]
    assert manage_client.post("/api/keys/", payload, format="json").status_code == 201


def test_other_validation_errors_keep_their_shape(manage_client: APIClient) -> None:
    response = manage_client.post("/api/keys/", {"scopes": ["nope"]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_the_admin_form_refuses_a_managed_key_without_connections(staff_client: Client) -> None:
    data = {
        "name": "admin-managed",
        "scopes": [Scope.LEASE_EXCLUSIVE.value],
        "allowed_models": "",
        "expires_at_0": "",
        "expires_at_1": "",
        "is_active": "on",
    }
    response = staff_client.post(reverse("admin:routing_clientapikey_add"), data)
    assert response.status_code == 200  # the form again, with the error
    assert POLICY_MESSAGE.search(response.content.decode())
    assert not ClientApiKey.objects.filter(name="admin-managed").exists()


# --- a managed key that goes ends its leases --------------------------------------------------


def test_revoking_a_managed_key_invalidates_its_leases(connection: ProviderConnection) -> None:
    key_id, _ = managed_key([connection.pk])
    lease_id = leased(key_id, connection)
    api_key_revoke(key=ClientApiKey.objects.get(pk=key_id), now=timezone.now())
    ended = row(lease_id)
    assert (ended.state, ended.end_reason) == (
        LeaseState.INVALIDATED,
        EndReason.MANAGED_KEY_REVOKED,
    )


def test_deactivating_a_managed_key_invalidates_its_leases(connection: ProviderConnection) -> None:
    key_id, _ = managed_key([connection.pk])
    lease_id = leased(key_id, connection)
    api_key_update(key=ClientApiKey.objects.get(pk=key_id), fields={"is_active": False})
    assert row(lease_id).state == LeaseState.INVALIDATED


def test_deleting_a_managed_key_invalidates_its_leases(connection: ProviderConnection) -> None:
    key_id, _ = managed_key([connection.pk])
    lease_id = leased(key_id, connection)
    api_key_delete(key=ClientApiKey.objects.get(pk=key_id))
    assert row(lease_id).state == LeaseState.INVALIDATED


def test_a_form_that_wrote_the_scopes_first_still_ends_the_leases(
    connection: ProviderConnection,
) -> None:
    key_id, _ = managed_key([connection.pk])
    lease_id = leased(key_id, connection)
    key = ClientApiKey.objects.get(pk=key_id)
    key.scopes = []  # as a ModelForm does before the service runs

    api_key_update(key=key, fields={})

    assert row(lease_id).end_reason == EndReason.AUTHORIZATION_CHANGED


def test_a_connection_left_out_of_the_allow_list_ends_its_lease_only(
    connection: ProviderConnection,
) -> None:
    other = ProviderConnection.objects.create(provider_id=connection.provider_id, name="other")
    key_id, _ = managed_key([connection.pk, other.pk])
    kept = leased(key_id, connection)
    key = ClientApiKey.objects.get(pk=key_id)

    api_key_update(key=key, fields={}, allowed_connections=[connection])
    assert row(kept).state == LeaseState.ACTIVE
    api_key_update(key=key, fields={}, allowed_connections=[other])
    assert (row(kept).state, row(kept).end_reason) == (
        LeaseState.INVALIDATED,
        EndReason.AUTHORIZATION_CHANGED,
    )


def test_losing_the_scope_ends_the_leases_and_renaming_does_not(
    connection: ProviderConnection,
) -> None:
    key_id, _ = managed_key([connection.pk])
    lease_id = leased(key_id, connection)
    key = ClientApiKey.objects.get(pk=key_id)
    api_key_update(key=key, fields={"name": "renamed"})
    assert row(lease_id).state == LeaseState.ACTIVE
    api_key_update(key=key, fields={"scopes": []})
    ended = row(lease_id)
    assert (ended.state, ended.end_reason) == (
        LeaseState.INVALIDATED,
        EndReason.AUTHORIZATION_CHANGED,
    )


# --- the managed connection set ----------------------------------------------------------------


def test_the_snapshot_reserves_the_connections_of_usable_managed_keys(
    connection: ProviderConnection,
) -> None:
    other = ProviderConnection.objects.create(provider_id=connection.provider_id, name="other")
    managed_key([connection.pk])
    revoked_id, _ = managed_key([other.pk], name="revoked")
    api_key_revoke(key=ClientApiKey.objects.get(pk=revoked_id), now=timezone.now())
    api_key_create(name="ordinary", allowed_connections=[other])

    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.managed_connections == {connection.pk}
    ordinary = next(k for k in snapshot.keys_by_hash.values() if k.name == "ordinary")
    model = f"{connection.provider_id}/m"
    assert [t.connection.id for t in plan_route(snapshot, model, ordinary).targets] == [other.pk]


def test_a_deleted_connection_ends_the_lease_that_binds_it_and_a_disabled_one_not(
    connection: ProviderConnection,
) -> None:
    other = connection_save(
        connection=ProviderConnection(),
        fields={"provider": connection.provider, "name": "other"},
    )
    key_id, _ = managed_key([connection.pk, other.pk])
    deleted = leased(key_id, other)
    connection_delete(connection=other)
    assert (row(deleted).state, row(deleted).end_reason) == (
        LeaseState.INVALIDATED,
        EndReason.CONNECTION_INELIGIBLE,
    )
    disabled = leased(key_id, connection)
    connection_save(connection=connection, fields={"name": "renamed"})
    assert row(disabled).state == LeaseState.ACTIVE
    connection_save(connection=connection, fields={"is_active": False})
    assert row(disabled).state == LeaseState.ACTIVE  # its next request moves it
