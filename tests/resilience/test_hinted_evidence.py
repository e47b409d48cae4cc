"""Short upstream hints lock others out only on evidence of a real limit, through the
attribution service: per (connection, model) pair on a provider whose quota is per model, per
connection on one whose quota is account-wide."""

from __future__ import annotations

from datetime import UTC

import pytest

from omniroute.core.store.memory import MemoryStore
from resilience.domain.attribution import Effect, TimerClass
from resilience.domain.classify.classifier import DEFAULT_COOLDOWN_PROFILES, FailureInput
from resilience.domain.lockout import LockoutSettings, LockRequest, record_hinted
from resilience.services.attribution import Policies, Subject, attempt_failed, attempt_succeeded
from resilience.services.connections import connection_state_get
from resilience.services.lockouts import lockout_record
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)  # the write-through reaches the database

NOW = 1_700_000_000.0
POLICIES = Policies(profile=DEFAULT_COOLDOWN_PROFILES["api_key"], tz=UTC)


def limited(hint_s: int = 2) -> FailureInput:
    return FailureInput(status=429, text="slow down", headers={"retry-after": str(hint_s)})


def subject(per_model_quota: bool) -> Subject:
    return Subject(provider="acme", connection_id=7, model="m", per_model_quota=per_model_quota)


@pytest.fixture
def store(fake_clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock=fake_clock)


async def refused(store: MemoryStore, per_model_quota: bool, hint_s: int = 2) -> Effect:
    verdict = await attempt_failed(
        store=store, subject=subject(per_model_quota), failure=limited(hint_s), policies=POLICIES
    )
    return verdict.effect


async def cooled(store: MemoryStore) -> float:
    state = await connection_state_get(store=store, connection_id=7, durable=subject(False).durable)
    return state.remaining(store.clock())


@pytest.mark.parametrize("per_model_quota", [True, False])
async def test_one_short_hint_is_counted_not_locked(
    store: MemoryStore, per_model_quota: bool
) -> None:
    assert await refused(store, per_model_quota) is Effect.COUNTED

    record = await lockout_record(store=store, provider="acme", connection_id=7)
    assert record.lock_for("m", store.clock()) is None
    assert await cooled(store) == 0


async def test_the_second_in_a_row_within_the_hint_locks_the_pair(
    store: MemoryStore, fake_clock: FakeClock
) -> None:
    await refused(store, True)
    fake_clock.advance(1)

    assert await refused(store, True) is Effect.LOCKED
    record = await lockout_record(store=store, provider="acme", connection_id=7)
    lock = record.lock_for("m", store.clock())
    assert (
        lock is not None and lock.remaining(store.clock()) == 2 and lock.timer == "upstream_hinted"
    )


async def test_the_second_in_a_row_cools_an_account_wide_connection(
    store: MemoryStore, fake_clock: FakeClock
) -> None:
    await refused(store, False)
    fake_clock.advance(1)

    assert await refused(store, False) is Effect.COOLED
    assert await cooled(store) == 2


@pytest.mark.parametrize("per_model_quota", [True, False])
async def test_a_second_hint_after_the_first_ran_out_is_no_evidence(
    store: MemoryStore, fake_clock: FakeClock, per_model_quota: bool
) -> None:
    await refused(store, per_model_quota)
    fake_clock.advance(3)

    assert await refused(store, per_model_quota) is Effect.COUNTED


@pytest.mark.parametrize("per_model_quota", [True, False])
async def test_a_success_in_between_clears_the_evidence(
    store: MemoryStore, per_model_quota: bool
) -> None:
    await refused(store, per_model_quota)
    record = await lockout_record(store=store, provider="acme", connection_id=7)
    await attempt_succeeded(
        store=store,
        subject=subject(per_model_quota),
        policies=POLICIES,
        permit=None,
        locks=record,
    )

    assert await refused(store, per_model_quota) is Effect.COUNTED


@pytest.mark.parametrize("per_model_quota", [True, False])
async def test_a_long_hint_locks_at_once(store: MemoryStore, per_model_quota: bool) -> None:
    effect = await refused(store, per_model_quota, hint_s=30)

    assert effect is (Effect.LOCKED if per_model_quota else Effect.COOLED)


def test_a_hinted_lock_makes_its_probe_s_refusal_evidence() -> None:
    request = LockRequest("rate_limit_exceeded", 2_000, True, timer=TimerClass.HINTED)
    settings = LockoutSettings()
    state, lock = record_hinted(None, None, request, settings, now=NOW, tz=UTC, short=True)
    assert lock is None
    state, lock = record_hinted(state, lock, request, settings, now=NOW + 1, tz=UTC, short=True)
    assert lock is not None and lock.until == NOW + 3

    # the lock ended 10 s ago with no success since: the probe's refusal locks again
    state, again = record_hinted(state, None, request, settings, now=NOW + 13, tz=UTC, short=True)
    assert again is not None and again.until == NOW + 15
