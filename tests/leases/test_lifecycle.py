"""The lease lifecycle of the gateway's issue at service level, and the owner token's secrecy:
only its SHA-256 is ever stored."""

from __future__ import annotations

import pytest
from django.db import connection

from leases.domain.states import EndReason, LeaseOutcome
from leases.domain.tokens import owner_hash, owner_is_valid, retry_after_seconds
from leases.models import ExclusiveConnectionLease
from leases.services import (
    lease_fence,
    lease_invalidate,
    lease_release,
    lease_renew,
    lease_transition,
    leases_expire,
)
from tests.leases.support import KEY, acquire, at, new_owner

pytestmark = pytest.mark.django_db

ONLY_CONNECTION = 3  # a pool of one connection


def test_the_lifecycle() -> None:
    token = new_owner()
    assert owner_is_valid(token)
    owner = owner_hash(token)

    first = acquire(owner, connection_id=ONLY_CONNECTION, now=at(0))
    again = acquire(owner, connection_id=ONLY_CONNECTION, now=at(5))
    released = lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(6))
    second = acquire(owner, connection_id=ONLY_CONNECTION, ttl_ms=60_000, now=at(7))
    stale = lease_renew(owner_hash=owner, generation=1, api_key_id=KEY, now=at(8))
    stale_fence = lease_fence(
        owner_hash=owner, generation=1, api_key_id=KEY, connection_id=ONLY_CONNECTION, now=at(8)
    )
    busy = acquire(owner_hash(new_owner()), connection_id=ONLY_CONNECTION, now=at(9.5))

    assert (first.outcome, first.lease and first.lease.generation) == (LeaseOutcome.ACQUIRED, 1)
    assert (again.outcome, again.lease and again.lease.generation) == (LeaseOutcome.REUSED, 1)
    assert released.outcome is LeaseOutcome.RELEASED
    assert (second.outcome, second.lease and second.lease.generation) == (LeaseOutcome.ACQUIRED, 2)
    assert stale.outcome is stale_fence.outcome is LeaseOutcome.STALE
    assert busy.outcome is LeaseOutcome.CONNECTION_BUSY
    assert second.lease is not None and busy.retry_after == second.lease.expires_at == at(67)
    assert retry_after_seconds(busy.retry_after, at(9.5)) == 58  # 57.5 s left, rounded up


def _every_stored_value() -> str:
    """Every value of every table of the test database, as text."""
    with connection.cursor() as cursor:
        dump: list[str] = []
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            dump.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(dump)


def test_the_raw_owner_token_is_never_stored() -> None:
    token = new_owner()
    owner = owner_hash(token)
    acquire(owner, connection_id=1, ttl_ms=5_000)
    lease_renew(owner_hash=owner, generation=1, api_key_id=KEY, now=at(1))
    lease_transition(
        owner_hash=owner,
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=2,
        reason=EndReason.HEALTH_OR_COOLDOWN,
        now=at(2),
    )
    lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(3))
    acquire(owner, connection_id=1, ttl_ms=1_000, now=at(4))
    leases_expire(now=at(10))
    acquire(owner, connection_id=2, now=at(11))
    lease_invalidate(
        owner_hash=owner,
        generation=3,
        api_key_id=KEY,
        reason=EndReason.MODEL_INELIGIBLE,
        now=at(12),
    )

    lease_columns = [field.attname for field in ExclusiveConnectionLease._meta.concrete_fields]
    rows = ExclusiveConnectionLease.objects.values_list(*lease_columns)
    stored = "\n".join(repr(row) for row in rows)
    everything = _every_stored_value()

    states = [row[lease_columns.index("state")] for row in rows]
    assert sorted(states) == ["EXPIRED", "INVALIDATED", "INVALIDATED", "RELEASED"]
    secret = token.removeprefix("vlo_")
    for haystack in (stored, everything):
        assert owner in haystack  # the search does see the stored columns
        assert token not in haystack and secret not in haystack
