"""``modelLockout.errorCodes`` through the attribution service: a transient failure counts
towards its pair's run, and so can take the pair out, only when its status is listed; a dropped
connection always counts. There is no switch: the lockout applies with the defaults."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

import pytest

from omniroute.core.store.memory import MemoryStore
from resilience.domain.attribution import Effect
from resilience.domain.classify.classifier import DEFAULT_COOLDOWN_PROFILES, FailureInput
from resilience.domain.lockout import LockoutSettings
from resilience.services.attribution import Policies, Subject, attempt_failed
from resilience.services.lockouts import lockout_record
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)  # the write-through reaches the database

DEFAULTS = Policies(profile=DEFAULT_COOLDOWN_PROFILES["api_key"], tz=UTC)
ONLY_429 = replace(DEFAULTS, lockout=LockoutSettings(error_codes=(429,)))
SUBJECT = Subject(provider="acme", connection_id=7, model="m", per_model_quota=True)


@pytest.fixture
def store(fake_clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock=fake_clock)


async def _fail_three_times(
    store: MemoryStore, policies: Policies, status: int, *, network: bool = False
) -> list[Effect]:
    effects = []
    for _ in range(3):  # availability.consecutiveFailures' default
        verdict = await attempt_failed(
            store=store,
            subject=SUBJECT,
            failure=FailureInput(status=status, text="upstream trouble"),
            policies=policies,
            network=network,
        )
        assert verdict.transient
        effects.append(verdict.effect)
    return effects


async def _locked(store: MemoryStore) -> bool:
    record = await lockout_record(store=store, provider="acme", connection_id=7)
    return record.lock_for("m", store.clock()) is not None


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_listed_statuses_take_the_pair_out_with_the_defaults(
    store: MemoryStore, status: int
) -> None:
    effects = await _fail_three_times(store, DEFAULTS, status)

    assert effects == [Effect.COUNTED, Effect.COUNTED, Effect.LOCKED]
    assert await _locked(store)


async def test_a_status_left_out_of_the_codes_is_not_counted(store: MemoryStore) -> None:
    effects = await _fail_three_times(store, ONLY_429, 500)

    assert effects == [Effect.NONE] * 3
    assert not await _locked(store)


async def test_a_dropped_connection_counts_whatever_the_codes(store: MemoryStore) -> None:
    effects = await _fail_three_times(store, ONLY_429, 502, network=True)

    assert effects == [Effect.COUNTED, Effect.COUNTED, Effect.LOCKED]
    assert await _locked(store)
