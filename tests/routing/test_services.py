"""Routing services: validation, secrets at rest, and snapshot invalidation after commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db.models import ProtectedError
from django.utils import timezone

from omniroute.core.config_version import config_local_version
from routing.domain.config.keys import hash_key
from routing.domain.config.vocabulary import Scope
from routing.domain.config.vocabulary import TestStatus as Status
from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import (
    api_key_create,
    api_key_revoke,
    api_key_update,
    combo_delete,
    combo_save,
    connection_clear_error,
    connection_delete,
    connection_save,
    provider_delete,
)
from tests.routing.conftest import UPSTREAM_SECRET

pytestmark = pytest.mark.django_db


def _new_connection(provider: Provider, name: str = "second", **fields: Any) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(), fields={"provider": provider, "name": name, **fields}
    )


def test_connection_save_encrypts_the_secret(connection: ProviderConnection) -> None:
    stored = ProviderConnection.objects.get(pk=connection.pk)
    assert UPSTREAM_SECRET not in stored.secret_encrypted
    assert stored.get_secret() == UPSTREAM_SECRET
    assert stored.masked_secret == "••••7890"


def test_connection_save_none_keeps_and_empty_clears(connection: ProviderConnection) -> None:
    connection_save(connection=connection, fields={"priority": 5})
    assert ProviderConnection.objects.get(pk=connection.pk).get_secret() == UPSTREAM_SECRET

    connection_save(connection=connection, secret="")

    assert not ProviderConnection.objects.get(pk=connection.pk).has_secret


def test_connection_save_validates(provider: Provider) -> None:
    with pytest.raises(ValidationError) as caught:
        _new_connection(provider, base_url="not a url")
    assert "base_url" in caught.value.message_dict
    assert not ProviderConnection.objects.filter(name="second").exists()


def test_service_invalidates_snapshot_only_after_commit(
    provider: Provider, django_capture_on_commit_callbacks: Any
) -> None:
    before = config_local_version()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        _new_connection(provider)
        assert config_local_version() == before

    assert len(callbacks) == 1
    assert config_local_version() > before


@pytest.mark.parametrize(
    "write",
    [
        lambda conn: connection_clear_error(connection=conn),
        lambda conn: connection_delete(connection=conn),
        lambda conn: api_key_create(name="k"),
        lambda conn: combo_save(combo=Combo(name="c")),
    ],
    ids=["clear_error", "connection_delete", "api_key_create", "combo_save"],
)
def test_every_write_invalidates_the_snapshot(
    write: Any, connection: ProviderConnection, django_capture_on_commit_callbacks: Any
) -> None:
    before = config_local_version()
    with django_capture_on_commit_callbacks(execute=True):
        write(connection)
    assert config_local_version() > before


def test_connection_clear_error_resets_state(connection: ProviderConnection) -> None:
    now = timezone.now()
    ProviderConnection.objects.filter(pk=connection.pk).update(
        rate_limited_until=now + timedelta(minutes=5),
        test_status=Status.BANNED,
        last_error="429 too many",
        last_error_at=now,
        last_error_type="rate_limit",
        error_code="429",
        backoff_level=3,
    )
    connection.refresh_from_db()

    connection_clear_error(connection=connection)

    stored = ProviderConnection.objects.get(pk=connection.pk)
    assert stored.rate_limited_until is None
    assert stored.test_status == Status.ACTIVE
    assert (stored.last_error, stored.last_error_type, stored.error_code) == ("", "", "")
    assert stored.last_error_at is None
    assert stored.backoff_level == 0


def test_api_key_create_stores_only_hash_and_prefix() -> None:
    key, plaintext = api_key_create(name="ci", scopes=[Scope.MANAGE])

    row = ClientApiKey.objects.filter(pk=key.pk).values().get()
    assert row["key_hash"] == hash_key(plaintext)
    assert row["prefix"] == plaintext[:12]
    assert all(plaintext not in str(value) for value in row.values())


def test_api_key_create_refuses_unknown_scopes() -> None:
    with pytest.raises(ValidationError) as caught:
        api_key_create(name="ci", scopes=["root"])
    assert "scopes" in caught.value.message_dict
    assert not ClientApiKey.objects.exists()


def test_api_key_update_sets_allow_lists(connection: ProviderConnection) -> None:
    key, _ = api_key_create(name="ci")

    api_key_update(key=key, fields={"allowed_models": ["mock/*"]}, allowed_connections=[connection])

    key.refresh_from_db()
    assert key.allowed_models == ["mock/*"]
    assert list(key.allowed_connections.all()) == [connection]


def test_api_key_revoke_is_idempotent(django_capture_on_commit_callbacks: Any) -> None:
    key, _ = api_key_create(name="ci")
    first = timezone.now()

    with django_capture_on_commit_callbacks() as callbacks:
        api_key_revoke(key=key, now=first)
        api_key_revoke(key=key, now=first + timedelta(hours=1))

    key.refresh_from_db()
    assert key.revoked_at == first
    assert not key.is_active
    assert len(callbacks) == 1


def test_combo_save_orders_and_replaces_targets(
    provider: Provider, connection: ProviderConnection
) -> None:
    combo = combo_save(
        combo=Combo(),
        fields={"name": "fast"},
        targets=[
            {"provider": provider, "model": "a"},
            {"provider": provider, "model": "b", "connection": connection, "weight": 3},
        ],
    )
    assert [(t.position, t.model) for t in combo.targets.all()] == [(0, "a"), (1, "b")]

    combo_save(combo=combo, targets=[{"provider": provider, "model": "c"}])

    assert [t.model for t in combo.targets.all()] == ["c"]


def test_combo_save_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ValidationError) as caught:
        combo_save(combo=Combo(), fields={"name": "w", "strategy": "no-such-strategy"})
    assert "strategy" in caught.value.message_dict
    assert not Combo.objects.exists()


def test_combo_save_refuses_connection_of_another_provider(
    other_provider: Provider, connection: ProviderConnection
) -> None:
    target = {"provider": other_provider, "model": "gpt-4o", "connection": connection}

    with pytest.raises(ValidationError) as caught:
        combo_save(combo=Combo(), fields={"name": "x"}, targets=[target])

    assert "connection" in caught.value.message_dict


def test_combo_delete_removes_targets(provider: Provider) -> None:
    combo = combo_save(
        combo=Combo(), fields={"name": "x"}, targets=[{"provider": provider, "model": "m"}]
    )
    combo_delete(combo=combo)
    assert not Combo.objects.exists()


def test_provider_delete_refused_while_in_use(connection: ProviderConnection) -> None:
    with pytest.raises(ProtectedError):
        provider_delete(provider=connection.provider)
