"""``lease_acquire`` through the database: generations, reuse,
conflicts, lazy expiry, and races lost at the unique indexes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError

from leases import rows
from leases.domain.states import EndReason, LeaseOutcome, LeaseState
from leases.models import ExclusiveConnectionLease
from leases.services import lease_invalidate, lease_release
from tests.leases.support import KEY, OTHER_KEY, T0, acquire, at, new_owner, new_owner_hash

pytestmark = pytest.mark.django_db


def test_first_acquire_is_generation_one() -> None:
    owner = new_owner_hash()

    result = acquire(owner, connection_id=5)

    assert result.outcome is LeaseOutcome.ACQUIRED and result.retry_after is None
    lease = result.lease
    assert lease is not None
    assert (lease.owner_hash, lease.api_key_id, lease.provider) == (owner, KEY, "openai")
    assert (lease.connection_id, lease.generation, lease.state) == (5, 1, LeaseState.ACTIVE)
    assert lease.acquired_at == lease.renewed_at == T0
    assert lease.expires_at == at(120)  # the default TTL
    assert lease.ended_at is None and lease.end_reason is None


@pytest.mark.parametrize(("ttl_ms", "seconds"), [(10, 1), (30_000, 30), (10**9, 1_800)])
def test_the_ttl_is_clamped(ttl_ms: int, seconds: int) -> None:
    result = acquire(new_owner_hash(), ttl_ms=ttl_ms)
    assert result.lease is not None and result.lease.expires_at == at(seconds)


def test_the_same_owner_key_and_connection_reuse_the_lease() -> None:
    owner = new_owner_hash()
    first = acquire(owner, connection_id=5)

    again = acquire(owner, connection_id=5, provider="openai-2", ttl_ms=60_000, now=at(30))

    assert again.outcome is LeaseOutcome.REUSED
    assert again.lease is not None and first.lease is not None
    assert again.lease.id == first.lease.id and again.lease.generation == 1
    assert again.lease.acquired_at == T0
    assert (again.lease.renewed_at, again.lease.expires_at) == (at(30), at(90))
    assert again.lease.provider == "openai-2"
    assert ExclusiveConnectionLease.objects.count() == 1


@pytest.mark.parametrize(("key", "connection"), [(OTHER_KEY, 5), (KEY, 6), (OTHER_KEY, 6)])
def test_an_owner_is_never_rebound(key: int, connection: int) -> None:
    owner = new_owner_hash()
    first = acquire(owner, connection_id=5)

    result = acquire(owner, connection_id=connection, api_key_id=key, now=at(10))

    assert result.outcome is LeaseOutcome.OWNER_ALREADY_ACTIVE
    assert result.lease == first.lease  # the binding is unchanged, expiry included
    assert ExclusiveConnectionLease.objects.count() == 1


def test_a_held_connection_is_busy_until_the_holders_expiry() -> None:
    first = acquire(new_owner_hash(), connection_id=5, ttl_ms=90_000)

    second = acquire(new_owner_hash(), connection_id=5, api_key_id=OTHER_KEY, now=at(20))

    assert second.outcome is LeaseOutcome.CONNECTION_BUSY
    assert second.lease is None  # nothing of the holder's lease but its expiry
    assert first.lease is not None and second.retry_after == first.lease.expires_at == at(90)
    assert ExclusiveConnectionLease.objects.count() == 1


def test_release_then_acquire_is_generation_two() -> None:
    owner = new_owner_hash()
    acquire(owner)
    assert lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(5)).outcome == (
        LeaseOutcome.RELEASED
    )

    result = acquire(owner, now=at(6))

    assert result.outcome is LeaseOutcome.ACQUIRED
    assert result.lease is not None and result.lease.generation == 2


def test_generations_grow_across_release_expiry_and_invalidation() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=1, ttl_ms=1_000)
    lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(0.5))
    acquire(owner, connection_id=2, ttl_ms=1_000, now=at(1))
    # generation 2 expires at 2 s, unseen until the next operation
    third = acquire(owner, connection_id=3, now=at(10))
    lease_invalidate(
        owner_hash=owner,
        generation=3,
        api_key_id=KEY,
        reason=EndReason.AUTHORIZATION_CHANGED,
        now=at(11),
    )

    fourth = acquire(owner, connection_id=1, now=at(12))

    assert third.lease is not None and third.lease.generation == 3
    assert fourth.lease is not None and fourth.lease.generation == 4
    history = ExclusiveConnectionLease.objects.order_by("id").values_list("generation", "state")
    assert list(history) == [(1, "RELEASED"), (2, "EXPIRED"), (3, "INVALIDATED"), (4, "ACTIVE")]


def test_generations_are_per_owner() -> None:
    acquire(new_owner_hash(), connection_id=1)
    result = acquire(new_owner_hash(), connection_id=2)
    assert result.lease is not None and result.lease.generation == 1


def test_lazy_expiry_frees_the_connection_at_the_expiry_instant() -> None:
    first = acquire(new_owner_hash(), connection_id=5, ttl_ms=1_000)
    assert first.lease is not None

    just_before = acquire(new_owner_hash(), connection_id=5, now=at(0.999))
    at_expiry = acquire(new_owner_hash(), connection_id=5, now=at(1))

    assert just_before.outcome is LeaseOutcome.CONNECTION_BUSY
    assert at_expiry.outcome is LeaseOutcome.ACQUIRED
    expired = ExclusiveConnectionLease.objects.get(pk=first.lease.id)
    assert (expired.state, expired.end_reason) == ("EXPIRED", "TTL_EXPIRED")
    assert expired.ended_at == at(1)  # dated at its expiry, not when it was noticed


def test_every_operation_expires_every_stale_row() -> None:
    acquire(new_owner_hash(), connection_id=1, ttl_ms=1_000)
    acquire(new_owner_hash(), connection_id=2, ttl_ms=1_000)
    acquire(new_owner_hash(), connection_id=3, ttl_ms=60_000)

    acquire(new_owner_hash(), connection_id=9, now=at(5))

    states = dict(ExclusiveConnectionLease.objects.values_list("connection_id", "state"))
    assert states == {1: "EXPIRED", 2: "EXPIRED", 3: "ACTIVE", 9: "ACTIVE"}


def test_an_expired_owner_acquires_anew_with_the_next_generation() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=5, ttl_ms=1_000)

    result = acquire(owner, connection_id=5, now=at(2))

    assert result.outcome is LeaseOutcome.ACQUIRED
    assert result.lease is not None and result.lease.generation == 2


def test_bad_inputs_are_refused_before_any_write() -> None:
    with pytest.raises(ValueError, match="SHA-256"):
        acquire(new_owner())  # the raw token, not its hash
    with pytest.raises(ValueError, match="SHA-256"):
        acquire(new_owner_hash().upper())
    with pytest.raises(ValueError, match="timezone-aware"):
        acquire(new_owner_hash(), now=dt.datetime(2025, 3, 1, 12))  # noqa: DTZ001
    assert not ExclusiveConnectionLease.objects.exists()


# --- races: another process committed between this operation's read and its insert ------------


def _blind_once(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Make ``rows.<name>`` miss the committed rows on its first call, as a read taken just
    before another process committed would; the insert then meets the real unique index."""
    real: Callable[..., Any] = getattr(rows, name)
    calls: list[int] = []

    def stale_then_real(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return None if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(rows, name, stale_then_real)
    return calls


def test_a_race_lost_on_the_connection_answers_connection_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    winner = acquire(new_owner_hash(), connection_id=5, ttl_ms=45_000)
    calls = _blind_once(monkeypatch, "holder_row")

    loser = acquire(new_owner_hash(), connection_id=5, now=at(1))

    assert len(calls) == 2  # the insert failed at the index, and the second run saw the winner
    assert loser.outcome is LeaseOutcome.CONNECTION_BUSY
    assert winner.lease is not None and loser.retry_after == winner.lease.expires_at
    assert ExclusiveConnectionLease.objects.filter(state="ACTIVE").count() == 1


def test_a_race_lost_on_the_owner_answers_owner_already_active(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = new_owner_hash()
    winner = acquire(owner, connection_id=5)
    calls = _blind_once(monkeypatch, "owned_row")

    loser = acquire(owner, connection_id=6, now=at(1))

    assert len(calls) == 2
    assert loser.outcome is LeaseOutcome.OWNER_ALREADY_ACTIVE
    assert loser.lease == winner.lease
    assert ExclusiveConnectionLease.objects.count() == 1


def test_other_integrity_errors_are_not_mistaken_for_races(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def broken_insert(*args: Any) -> Any:
        calls.append(1)
        raise IntegrityError("CHECK constraint failed: lease_generation_gt_0")

    monkeypatch.setattr(rows, "insert_row", broken_insert)

    with pytest.raises(IntegrityError):
        acquire(new_owner_hash())
    assert calls == [1]
