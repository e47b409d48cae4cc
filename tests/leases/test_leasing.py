"""The state machine's pure decisions, without the database."""

from __future__ import annotations

import datetime as dt

import pytest

from leases.domain.leasing import (
    Binding,
    acquire_outcome,
    fence_outcome,
    holds,
    is_expired,
    lease_expiry,
    next_generation,
    release_repeats,
    transition_outcome,
)
from leases.domain.states import EndReason, LeaseOutcome, LeaseState

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
HELD = Binding(generation=3, api_key_id=7, connection_id=40)


def test_the_vocabulary() -> None:
    assert [s.value for s in LeaseState] == ["ACTIVE", "RELEASED", "EXPIRED", "INVALIDATED"]
    assert len(EndReason) == 9
    assert len(LeaseOutcome) == 13


def test_expiry_arithmetic() -> None:
    assert lease_expiry(NOW, None) == NOW + dt.timedelta(seconds=120)
    assert lease_expiry(NOW, 10) == NOW + dt.timedelta(seconds=1)  # clamped up
    assert lease_expiry(NOW, 5_000_000) == NOW + dt.timedelta(minutes=30)  # clamped down
    assert is_expired(NOW, NOW)  # the expiry instant itself is over
    assert not is_expired(NOW + dt.timedelta(microseconds=1), NOW)


@pytest.mark.parametrize(("highest", "expected"), [(None, 1), (0, 1), (1, 2), (41, 42)])
def test_next_generation(highest: int | None, expected: int) -> None:
    assert next_generation(highest) == expected


@pytest.mark.parametrize(
    ("owned", "held", "key", "connection", "expected"),
    [
        (None, False, 7, 40, LeaseOutcome.ACQUIRED),
        (None, True, 7, 40, LeaseOutcome.CONNECTION_BUSY),
        (HELD, False, 7, 40, LeaseOutcome.REUSED),
        (HELD, False, 8, 40, LeaseOutcome.OWNER_ALREADY_ACTIVE),  # another key
        (HELD, False, 7, 41, LeaseOutcome.OWNER_ALREADY_ACTIVE),  # another connection
        (HELD, True, 7, 41, LeaseOutcome.OWNER_ALREADY_ACTIVE),  # never rebinds
    ],
)
def test_acquire_outcome(
    owned: Binding | None, held: bool, key: int, connection: int, expected: LeaseOutcome
) -> None:
    outcome = acquire_outcome(
        owned=owned, connection_held=held, api_key_id=key, connection_id=connection
    )
    assert outcome is expected


@pytest.mark.parametrize(
    ("owned", "generation", "key", "connection", "held", "expected"),
    [
        (None, 3, 7, 41, False, LeaseOutcome.STALE),
        (HELD, 2, 7, 41, False, LeaseOutcome.STALE),
        (HELD, 3, 8, 41, False, LeaseOutcome.STALE),
        (HELD, 3, 7, 40, False, LeaseOutcome.REUSED),
        (HELD, 3, 7, 41, True, LeaseOutcome.CONNECTION_BUSY),
        (HELD, 3, 7, 41, False, LeaseOutcome.TRANSITIONED),
    ],
)
def test_transition_outcome(
    owned: Binding | None,
    generation: int,
    key: int,
    connection: int,
    held: bool,
    expected: LeaseOutcome,
) -> None:
    outcome = transition_outcome(
        owned=owned,
        generation=generation,
        api_key_id=key,
        connection_id=connection,
        connection_held=held,
    )
    assert outcome is expected


def test_holds_needs_exact_generation_and_key() -> None:
    assert holds(HELD, generation=3, api_key_id=7)
    assert not holds(HELD, generation=4, api_key_id=7)
    assert not holds(HELD, generation=3, api_key_id=8)
    assert not holds(None, generation=3, api_key_id=7)


@pytest.mark.parametrize(
    ("state", "key", "expected"),
    [
        (LeaseState.RELEASED, 7, True),
        (LeaseState.RELEASED, 8, False),
        (LeaseState.EXPIRED, 7, False),
        (LeaseState.INVALIDATED, 7, False),
        (LeaseState.ACTIVE, 7, False),
        (None, None, False),
    ],
)
def test_release_repeats(state: LeaseState | None, key: int | None, expected: bool) -> None:
    assert release_repeats(state, key, api_key_id=7) is expected


@pytest.mark.parametrize(
    ("owned", "generation", "key", "connection", "expected"),
    [
        (None, 3, 7, 40, LeaseOutcome.REQUIRED),
        (HELD, 2, 7, 40, LeaseOutcome.STALE),
        (HELD, 2, 8, 41, LeaseOutcome.STALE),  # the generation is checked first
        (HELD, 3, 8, 40, LeaseOutcome.AUTHORIZATION_MISMATCH),
        (HELD, 3, 8, 41, LeaseOutcome.AUTHORIZATION_MISMATCH),  # then the key
        (HELD, 3, 7, 41, LeaseOutcome.CONNECTION_MISMATCH),
        (HELD, 3, 7, 40, LeaseOutcome.VALID),
    ],
)
def test_fence_outcome(
    owned: Binding | None, generation: int, key: int, connection: int, expected: LeaseOutcome
) -> None:
    outcome = fence_outcome(
        owned=owned, generation=generation, api_key_id=key, connection_id=connection
    )
    assert outcome is expected
