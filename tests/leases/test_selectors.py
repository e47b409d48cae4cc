"""Lease reads: the active lease, the fenced status and the connection occupancy. Reads never
write, and an expired row that no operation has marked yet is not counted."""

from __future__ import annotations

import pytest

from leases.models import ExclusiveConnectionLease
from leases.selectors import lease_active, lease_occupancy, lease_status
from leases.services import lease_release
from tests.leases.support import KEY, OTHER_KEY, acquire, at, new_owner_hash

pytestmark = pytest.mark.django_db


def test_lease_active_sees_only_an_unexpired_active_lease() -> None:
    owner = new_owner_hash()
    acquired = acquire(owner, ttl_ms=10_000)

    assert lease_active(owner_hash=owner, now=at(9.9)) == acquired.lease
    assert lease_active(owner_hash=owner, now=at(10)) is None
    assert lease_active(owner_hash=new_owner_hash(), now=at(1)) is None
    assert ExclusiveConnectionLease.objects.get().state == "ACTIVE"  # a read marks nothing


def test_lease_status_is_fenced_by_generation_and_key() -> None:
    owner = new_owner_hash()
    acquired = acquire(owner)

    assert lease_status(owner_hash=owner, generation=1, api_key_id=KEY, now=at(1)) == (
        acquired.lease
    )
    assert lease_status(owner_hash=owner, generation=2, api_key_id=KEY, now=at(1)) is None
    assert lease_status(owner_hash=owner, generation=1, api_key_id=OTHER_KEY, now=at(1)) is None
    lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(2))
    assert lease_status(owner_hash=owner, generation=1, api_key_id=KEY, now=at(3)) is None


def test_lease_occupancy_maps_connections_to_their_holders() -> None:
    first, second, gone = new_owner_hash(), new_owner_hash(), new_owner_hash()
    acquire(first, connection_id=1, ttl_ms=60_000)
    acquire(second, connection_id=2, ttl_ms=30_000)
    acquire(gone, connection_id=3, ttl_ms=1_000)
    released = new_owner_hash()
    acquire(released, connection_id=4)
    lease_release(owner_hash=released, generation=1, api_key_id=KEY, now=at(1))

    occupancy = lease_occupancy(now=at(5))

    assert occupancy == {1: (first, at(60)), 2: (second, at(30))}


def test_reads_refuse_a_raw_owner_token() -> None:
    with pytest.raises(ValueError):
        lease_active(owner_hash="vlo_" + "a" * 43)
