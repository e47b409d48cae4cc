"""The lease table's own guarantees: owner hashes are SHA-256 hex,
generations are positive, and only one ACTIVE row per owner and per connection, whoever
writes. These hold in the database itself, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DataError, IntegrityError, transaction

from leases.models import ExclusiveConnectionLease
from tests.leases.support import T0, at, new_owner_hash

pytestmark = pytest.mark.django_db


def _row(**fields: Any) -> ExclusiveConnectionLease:
    values: dict[str, Any] = {
        "lease_owner_hash": new_owner_hash(),
        "api_key_id": 1,
        "provider": "openai",
        "connection_id": 1,
        "generation": 1,
        "state": "ACTIVE",
        "acquired_at": T0,
        "renewed_at": T0,
        "expires_at": at(120),
    }
    values.update(fields)
    return ExclusiveConnectionLease.objects.create(**values)


def _refused(**fields: Any) -> None:
    # PostgreSQL refuses an over-long value before any check (DataError); SQLite has no lengths.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        _row(**fields)


@pytest.mark.parametrize(
    "owner",
    [
        "vlo_" + "a" * 43,  # a raw owner token
        "A" * 64,  # uppercase hex
        "g" * 64,
        "a" * 63,
        "a" * 64 + "\n",
        "",
    ],
)
def test_only_a_lowercase_sha256_hex_owner_is_stored(owner: str) -> None:
    _refused(lease_owner_hash=owner)


def test_a_generation_is_positive() -> None:
    _refused(generation=0)


def test_a_state_is_one_of_the_four() -> None:
    _refused(state="PAUSED")


def test_one_active_row_per_owner() -> None:
    owner = new_owner_hash()
    _row(lease_owner_hash=owner, connection_id=1)
    _refused(lease_owner_hash=owner, connection_id=2, generation=2)
    _row(lease_owner_hash=owner, connection_id=3, generation=2, state="RELEASED")


def test_one_active_row_per_connection_across_keys_and_providers() -> None:
    _row(connection_id=7, api_key_id=1, provider="openai")
    _refused(connection_id=7, api_key_id=2, provider="anthropic")
    _row(connection_id=7, state="EXPIRED")
    _row(connection_id=7, state="INVALIDATED")


def test_str_shows_only_a_prefix_of_the_owner_hash() -> None:
    row = _row()
    assert row.lease_owner_hash not in str(row)
    assert row.lease_owner_hash[:12] in str(row)
