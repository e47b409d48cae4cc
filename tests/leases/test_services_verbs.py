"""Transition, renew, release, invalidate and fence through the database,
and the bulk endings (expiry, a revoked key, a removed connection)."""

from __future__ import annotations

import pytest

from leases.domain.states import EndReason, LeaseOutcome
from leases.models import ExclusiveConnectionLease
from leases.selectors import lease_status
from leases.services import (
    LeaseResult,
    lease_fence,
    lease_invalidate,
    lease_release,
    lease_renew,
    lease_transition,
    leases_expire,
    leases_invalidate_for_connection,
    leases_invalidate_for_key,
)
from tests.leases.support import KEY, OTHER_KEY, T0, acquire, at, new_owner_hash

pytestmark = pytest.mark.django_db

MOVED = EndReason.CONNECTION_INELIGIBLE


def _states() -> list[tuple[int, str, str]]:
    rows = ExclusiveConnectionLease.objects.order_by("id")
    return list(rows.values_list("connection_id", "state", "end_reason"))


# --- transition -------------------------------------------------------------------------------


def test_transition_moves_the_lease_and_keeps_generation_and_expiry() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=1, ttl_ms=60_000)

    result = lease_transition(
        owner_hash=owner,
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=2,
        reason=MOVED,
        now=at(10),
    )

    assert result.outcome is LeaseOutcome.TRANSITIONED
    lease = result.lease
    assert lease is not None
    assert (lease.connection_id, lease.generation, lease.expires_at) == (2, 1, at(60))
    assert lease.acquired_at == at(10)
    assert _states() == [(1, "INVALIDATED", "CONNECTION_INELIGIBLE"), (2, "ACTIVE", "")]
    assert lease_status(owner_hash=owner, generation=1, api_key_id=KEY, now=at(11)) == lease


@pytest.mark.parametrize(("generation", "key"), [(2, KEY), (1, OTHER_KEY)])
def test_transition_with_a_stale_generation_or_another_key_is_stale(
    generation: int, key: int
) -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=1)

    result = lease_transition(
        owner_hash=owner,
        generation=generation,
        api_key_id=key,
        provider="openai",
        connection_id=2,
        reason=MOVED,
        now=at(1),
    )

    assert (result.outcome, result.lease) == (LeaseOutcome.STALE, None)
    assert _states() == [(1, "ACTIVE", "")]


def test_transition_without_a_lease_is_stale() -> None:
    result = lease_transition(
        owner_hash=new_owner_hash(),
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=2,
        reason=MOVED,
        now=T0,
    )
    assert result.outcome is LeaseOutcome.STALE
    assert not ExclusiveConnectionLease.objects.exists()


def test_transition_to_the_current_connection_is_reused() -> None:
    owner = new_owner_hash()
    first = acquire(owner, connection_id=1)

    result = lease_transition(
        owner_hash=owner,
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=1,
        reason=MOVED,
        now=at(1),
    )

    assert (result.outcome, result.lease) == (LeaseOutcome.REUSED, first.lease)


def test_transition_to_a_held_connection_is_busy() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=1)
    acquire(new_owner_hash(), connection_id=2, ttl_ms=30_000, now=at(5))

    result = lease_transition(
        owner_hash=owner,
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=2,
        reason=MOVED,
        now=at(6),
    )

    assert result.outcome is LeaseOutcome.CONNECTION_BUSY
    assert (result.lease, result.retry_after) == (None, at(35))
    assert _states() == [(1, "ACTIVE", ""), (2, "ACTIVE", "")]


def test_transition_refuses_an_unknown_reason() -> None:
    with pytest.raises(ValueError):
        lease_transition(
            owner_hash=new_owner_hash(),
            generation=1,
            api_key_id=KEY,
            provider="openai",
            connection_id=2,
            reason="BORED",  # type: ignore[arg-type]
            now=T0,
        )


# --- renew ------------------------------------------------------------------------------------


def test_renew_extends_from_now_and_keeps_the_generation() -> None:
    owner = new_owner_hash()
    acquire(owner)

    result = lease_renew(owner_hash=owner, generation=1, api_key_id=KEY, ttl_ms=5_000, now=at(100))

    assert result.outcome is LeaseOutcome.RENEWED and result.lease is not None
    assert (result.lease.generation, result.lease.acquired_at) == (1, T0)
    assert (result.lease.renewed_at, result.lease.expires_at) == (at(100), at(105))


@pytest.mark.parametrize(
    ("generation", "key", "seconds"), [(2, KEY, 1), (1, OTHER_KEY, 1), (1, KEY, 120)]
)
def test_renew_of_anything_but_the_exact_active_lease_is_stale(
    generation: int, key: int, seconds: float
) -> None:
    owner = new_owner_hash()
    acquire(owner)  # expires at 120 s

    result = lease_renew(owner_hash=owner, generation=generation, api_key_id=key, now=at(seconds))

    assert (result.outcome, result.lease) == (LeaseOutcome.STALE, None)


# --- release ----------------------------------------------------------------------------------


def test_release_is_idempotent_under_the_same_key() -> None:
    owner = new_owner_hash()
    acquire(owner)

    first = lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(1))
    again = lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(2))
    other_key = lease_release(owner_hash=owner, generation=1, api_key_id=OTHER_KEY, now=at(3))

    assert first.outcome is again.outcome is LeaseOutcome.RELEASED
    assert first.lease is not None and first.lease == again.lease
    assert (first.lease.ended_at, first.lease.end_reason) == (at(1), EndReason.OWNER_EXIT)
    assert other_key.outcome is LeaseOutcome.STALE


def test_release_keeps_the_clients_reason() -> None:
    owner = new_owner_hash()
    acquire(owner)
    result = lease_release(
        owner_hash=owner, generation=1, api_key_id=KEY, reason=EndReason.CLIENT_CANCELLED, now=at(1)
    )
    assert result.lease is not None and result.lease.end_reason is EndReason.CLIENT_CANCELLED


def test_release_refuses_a_reason_that_is_not_the_clients() -> None:
    with pytest.raises(ValueError, match="OWNER_EXIT or CLIENT_CANCELLED"):
        lease_release(
            owner_hash=new_owner_hash(), generation=1, api_key_id=KEY, reason=MOVED, now=T0
        )


@pytest.mark.parametrize("ending", ["expired", "invalidated", "never", "other_generation"])
def test_release_of_a_lease_that_was_not_released_is_stale(ending: str) -> None:
    owner = new_owner_hash()
    acquire(owner, ttl_ms=1_000)
    generation, now = 1, at(0.5)
    if ending == "expired":
        now = at(5)
    elif ending == "invalidated":
        lease_invalidate(owner_hash=owner, generation=1, api_key_id=KEY, reason=MOVED, now=now)
    elif ending == "other_generation":
        generation = 2
    if ending == "never":
        owner = new_owner_hash()

    result = lease_release(owner_hash=owner, generation=generation, api_key_id=KEY, now=now)

    assert (result.outcome, result.lease) == (LeaseOutcome.STALE, None)


def test_release_after_a_transition_ends_the_new_binding() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=1)
    lease_transition(
        owner_hash=owner,
        generation=1,
        api_key_id=KEY,
        provider="openai",
        connection_id=2,
        reason=MOVED,
        now=at(1),
    )

    first = lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(2))
    again = lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(3))

    assert first.outcome is again.outcome is LeaseOutcome.RELEASED
    assert _states() == [(1, "INVALIDATED", "CONNECTION_INELIGIBLE"), (2, "RELEASED", "OWNER_EXIT")]


# --- invalidate -------------------------------------------------------------------------------


def test_invalidate_ends_the_exact_lease_only() -> None:
    owner = new_owner_hash()
    acquire(owner)
    reason = EndReason.AUTHORIZATION_CHANGED

    stale = lease_invalidate(owner_hash=owner, generation=2, api_key_id=KEY, reason=reason, now=T0)
    wrong_key = lease_invalidate(
        owner_hash=owner, generation=1, api_key_id=OTHER_KEY, reason=reason, now=T0
    )
    done = lease_invalidate(
        owner_hash=owner, generation=1, api_key_id=KEY, reason=reason, now=at(1)
    )
    twice = lease_invalidate(
        owner_hash=owner, generation=1, api_key_id=KEY, reason=reason, now=at(2)
    )

    assert stale.outcome is wrong_key.outcome is twice.outcome is LeaseOutcome.STALE
    assert done.outcome is LeaseOutcome.INVALIDATED and done.lease is not None
    assert (done.lease.ended_at, done.lease.end_reason) == (at(1), reason)


# --- fence ------------------------------------------------------------------------------------


def test_fence_answers_in_order() -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=5)

    def fence(generation: int = 1, key: int = KEY, connection: int = 5) -> LeaseOutcome:
        return lease_fence(
            owner_hash=owner,
            generation=generation,
            api_key_id=key,
            connection_id=connection,
            now=at(1),
        ).outcome

    assert fence() is LeaseOutcome.VALID
    assert fence(generation=2) is LeaseOutcome.STALE
    assert fence(generation=2, key=OTHER_KEY) is LeaseOutcome.STALE
    assert fence(key=OTHER_KEY) is LeaseOutcome.AUTHORIZATION_MISMATCH
    assert fence(connection=6) is LeaseOutcome.CONNECTION_MISMATCH
    assert (
        lease_fence(
            owner_hash=new_owner_hash(), generation=1, api_key_id=KEY, connection_id=5, now=at(1)
        ).outcome
        is LeaseOutcome.REQUIRED
    )


def test_fence_hands_the_binding_only_to_its_holder() -> None:
    owner = new_owner_hash()
    acquired = acquire(owner, connection_id=5)

    def fence(key: int, connection: int) -> LeaseResult:
        return lease_fence(
            owner_hash=owner, generation=1, api_key_id=key, connection_id=connection, now=at(1)
        )

    valid, mismatch, foreign = fence(KEY, 5), fence(KEY, 6), fence(OTHER_KEY, 5)

    assert valid.lease == mismatch.lease == acquired.lease
    assert foreign.lease is None


@pytest.mark.parametrize("ending", ["released", "expired", "invalidated"])
def test_fence_requires_a_lease_once_it_ended(ending: str) -> None:
    owner = new_owner_hash()
    acquire(owner, connection_id=5, ttl_ms=10_000)
    if ending == "released":
        lease_release(owner_hash=owner, generation=1, api_key_id=KEY, now=at(1))
    elif ending == "invalidated":
        lease_invalidate(owner_hash=owner, generation=1, api_key_id=KEY, reason=MOVED, now=at(1))

    result = lease_fence(
        owner_hash=owner, generation=1, api_key_id=KEY, connection_id=5, now=at(10)
    )

    assert (result.outcome, result.lease) == (LeaseOutcome.REQUIRED, None)
    # The fence only reads: an expired row is marked by the next lease operation.
    marked = "ACTIVE" if ending == "expired" else ending.upper()
    assert ExclusiveConnectionLease.objects.get().state == marked


# --- bulk endings -----------------------------------------------------------------------------


def test_leases_expire_marks_and_counts_the_stale_rows() -> None:
    acquire(new_owner_hash(), connection_id=1, ttl_ms=1_000)
    acquire(new_owner_hash(), connection_id=2, ttl_ms=2_000)
    acquire(new_owner_hash(), connection_id=3, ttl_ms=60_000)

    assert leases_expire(now=at(2)) == 2
    assert leases_expire(now=at(2)) == 0
    assert [state for _, state, _ in _states()] == ["EXPIRED", "EXPIRED", "ACTIVE"]


def test_a_revoked_key_loses_its_active_leases() -> None:
    acquire(new_owner_hash(), connection_id=1)
    acquire(new_owner_hash(), connection_id=2)
    acquire(new_owner_hash(), connection_id=3, api_key_id=OTHER_KEY)
    released = new_owner_hash()
    acquire(released, connection_id=4)
    lease_release(owner_hash=released, generation=1, api_key_id=KEY, now=at(1))

    count = leases_invalidate_for_key(api_key_id=KEY, now=at(2))

    assert count == 2
    assert _states() == [
        (1, "INVALIDATED", "MANAGED_KEY_REVOKED"),
        (2, "INVALIDATED", "MANAGED_KEY_REVOKED"),
        (3, "ACTIVE", ""),
        (4, "RELEASED", "OWNER_EXIT"),
    ]


def test_a_removed_connection_loses_its_lease() -> None:
    acquire(new_owner_hash(), connection_id=1)
    acquire(new_owner_hash(), connection_id=2)

    assert leases_invalidate_for_connection(connection_id=2, now=at(1)) == 1
    assert _states() == [(1, "ACTIVE", ""), (2, "INVALIDATED", "CONNECTION_INELIGIBLE")]
