"""The model-lockout store services on both backends, with a fake clock."""

from __future__ import annotations

import datetime as dt

import pytest

from omniroute.core.store import StateStore
from resilience.domain import lock_record
from resilience.domain.lockout import FailureState, Lock, LockoutSettings, LockRequest, LockScope
from resilience.services.lockout_operations import (
    LockView,
    lockout_clear_all,
    lockout_clear_matching,
    lockout_list,
    lockout_unlock,
)
from resilience.services.lockouts import (
    lockout_key,
    lockout_record,
    lockout_record_failure,
    lockout_record_success,
)
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)  # the locks' durable copy is written too

DEFAULTS = LockoutSettings()
RATE_LIMIT = LockRequest("rate_limit", window_seconds=30.0)


async def _fail(
    store: StateStore,
    connection: int = 1,
    model: str = "gpt-4o",
    *,
    provider: str = "openai",
    scope: LockScope = LockScope.QUOTA_FAMILY,
    request: LockRequest = RATE_LIMIT,
) -> float:
    """Record one failure; the lock's remaining seconds."""
    lock = await lockout_record_failure(
        store=store,
        provider=provider,
        connection_id=connection,
        model=model,
        scope=scope,
        request=request,
        settings=DEFAULTS,
        tz=dt.UTC,
    )
    return lock.remaining(store.clock())


async def _locked(store: StateStore, connection: int = 1, model: str = "gpt-4o") -> float | None:
    record = await lockout_record(store=store, provider="openai", connection_id=connection)
    lock = record.lock_for(model, store.clock())
    return None if lock is None else lock.remaining(store.clock())


async def _listed(store: StateStore) -> list[tuple[str, int, str]]:
    return [(v.provider, v.connection_id, v.model) for v in await lockout_list(store=store)]


async def test_a_failure_locks_only_that_model(state_store: StateStore) -> None:
    assert await _fail(state_store) == 120.0

    assert await _locked(state_store) == 120.0
    assert await _locked(state_store, model="gpt-4o-mini") is None
    assert await _locked(state_store, connection=2) is None


async def test_failures_escalate_and_the_lock_expires(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    assert [await _fail(state_store) for _ in range(3)] == [120.0, 240.0, 480.0]

    fake_clock.advance(480)
    assert await _locked(state_store) is None
    assert await lockout_list(store=state_store) == []
    # the failure window outlives the lock: a model failing right after its lock keeps escalating
    assert await _fail(state_store) == 960.0


async def test_listing_describes_each_lock_longest_first(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    await _fail(state_store, 1)
    await _fail(state_store, 1)  # 240 s
    await _fail(state_store, 7, "Claude-X", provider="anthropic", scope=LockScope.EXACT)
    fake_clock.advance(10)

    views = await lockout_list(store=state_store)

    start = fake_clock.now - 10
    assert views == [
        LockView("openai", 1, "gpt-4o", "rate_limit", 230_000, 2, start, start + 240, False),
        LockView("anthropic", 7, "claude-x", "rate_limit", 110_000, 1, start, start + 120, True),
    ]


async def test_success_decays_and_at_zero_drops_state_and_lock(state_store: StateStore) -> None:
    for _ in range(3):
        await _fail(state_store)  # count 3

    async def succeed() -> None:
        await lockout_record_success(
            store=state_store, provider="openai", connection_id=1, model="gpt-4o"
        )

    await succeed()  # 3 → 1: the lock stays
    record = await lockout_record(store=state_store, provider="openai", connection_id=1)
    assert record.failures["m:gpt-4o"].failure_count == 1
    assert await _locked(state_store) == 480.0

    await succeed()  # 1 → 0: both go
    assert await _locked(state_store) is None
    assert await state_store.get(lockout_key("openai", 1)) is None


async def test_unlock_one_connection_then_the_whole_provider(state_store: StateStore) -> None:
    for connection in (1, 2, 3):
        await _fail(state_store, connection)
    await _fail(state_store, 1, "other")
    await _fail(state_store, 9, provider="anthropic")

    removed = await lockout_unlock(
        store=state_store, provider="openai", model="gpt-4o", connection_id=1
    )
    assert removed == 1
    assert await _locked(state_store, 1) is None
    assert await _locked(state_store, 2) == 120.0

    removed = await lockout_unlock(store=state_store, provider="openai", model="gpt-4o")
    assert removed == 2
    assert sorted(await _listed(state_store)) == [
        ("anthropic", 9, "gpt-4o"),
        ("openai", 1, "other"),
    ]


async def test_unlock_reaches_exact_locks_and_forgets_the_failures(
    state_store: StateStore,
) -> None:
    await _fail(state_store, 1, "GPT-4o", scope=LockScope.EXACT)
    await _fail(state_store, 1, "GPT-4o")

    removed = await lockout_unlock(
        store=state_store, provider="openai", model="GPT-4o", connection_id=1
    )

    assert removed == 2  # the quota-family and the exact slot
    assert await _listed(state_store) == []
    assert await _fail(state_store, 1, "GPT-4o") == 120.0  # escalation starts over


async def test_unlock_of_nothing_removes_nothing(state_store: StateStore) -> None:
    assert await lockout_unlock(store=state_store, provider="openai", model="gpt-4o") == 0
    assert (
        await lockout_unlock(store=state_store, provider="openai", model="gpt-4o", connection_id=4)
        == 0
    )


async def test_clear_all_drops_every_record_and_nothing_else(state_store: StateStore) -> None:
    await _fail(state_store, 1)
    await _fail(state_store, 2, provider="anthropic")
    await state_store.set("breaker:openai", {"state": "open"})

    assert await lockout_clear_all(store=state_store) == 2

    assert await _listed(state_store) == []
    assert await state_store.get("breaker:openai") == {"state": "open"}


async def test_clear_matching_drops_only_the_named_provider_or_connection(
    state_store: StateStore,
) -> None:
    for connection, model in ((1, "gpt-4o"), (1, "o3"), (2, "gpt-4o")):
        await _fail(state_store, connection, model)
    await _fail(state_store, 3, "claude", provider="anthropic")

    assert await lockout_clear_matching(store=state_store, connection_id=2) == 1
    remaining = [("anthropic", 3, "claude"), ("openai", 1, "gpt-4o"), ("openai", 1, "o3")]
    assert sorted(await _listed(state_store)) == remaining
    assert await lockout_clear_matching(store=state_store, provider="openai") == 2
    assert await _listed(state_store) == [("anthropic", 3, "claude")]
    assert await lockout_clear_matching(store=state_store, provider="openai") == 0
    for connection, count in ((4, 0), (3, 1)):  # one record, named by both
        cleared = await lockout_clear_matching(
            store=state_store, provider="anthropic", connection_id=connection
        )
        assert cleared == count
    assert await _listed(state_store) == []
    assert await _fail(state_store, 1, "gpt-4o") == 120.0  # escalation starts over


async def test_clear_matching_needs_a_provider_or_a_connection(state_store: StateStore) -> None:
    with pytest.raises(ValueError):
        await lockout_clear_matching(store=state_store)


@pytest.mark.parametrize("upstream_reset", [False, True])
async def test_exact_cooldowns_respect_the_cap_unless_upstream(
    state_store: StateStore, upstream_reset: bool
) -> None:
    request = LockRequest("rate_limit", 7_200_000, upstream_reset, 30.0)
    assert await _fail(state_store, request=request) == (7200.0 if upstream_reset else 1800.0)


def test_the_soft_eviction_cap_drops_the_oldest_idle_failure_states_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lock_record, "EVICTION_CAP", 3)
    now = 1_000.0
    failures = {f"m:{i}": FailureState(1, now + i, 60.0, 30.0) for i in range(5)}
    locked = {"m:0": Lock("rate_limit", now + 100, now, 1)}  # the oldest, but still locked

    pruned = lock_record.LockRecord(locked, failures).pruned(now + 5)

    assert set(pruned.failures) == {"m:0", "m:3", "m:4"}
    assert set(pruned.locks) == {"m:0"}
