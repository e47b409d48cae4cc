"""Model locks survive a restart: each change that places or lifts a lock writes the
connection's record to ``model_lock_records`` (an upstream-hinted lock before the
answer), and the start-up restore loads the rows into an empty store, so a process that
restarts on the memory store keeps its locked models locked until the locks end.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from channels.db import database_sync_to_async

from omniroute.core import tasks
from omniroute.core.store import MemoryStore, StateStore
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.lockout import LockoutSettings, LockRequest, LockScope
from resilience.models import ModelLockRecord
from resilience.persistence import (
    persist_lock_record,
    persisted_lock_records,
)
from resilience.services import lockout_operations, lockouts
from resilience.services.housekeeping import resilience_ready
from resilience.services.lockout_operations import lockout_unlock
from resilience.services.lockouts import (
    lockout_record,
    lockout_record_failure,
    lockout_record_success,
    lockout_restore,
    pair_record_transient,
)
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)

PROVIDER, CONNECTION, MODEL = "openai", 7, "gpt-4o"
HINTED = LockRequest("rate_limit", 600_000, True)  # an upstream Retry-After of 600 s


async def _hinted_lock(store: StateStore) -> float:
    lock = await lockout_record_failure(
        store=store,
        provider=PROVIDER,
        connection_id=CONNECTION,
        model=MODEL,
        scope=LockScope.EXACT,
        request=HINTED,
        settings=LockoutSettings(),
        tz=dt.UTC,
    )
    return lock.until


async def _transient(store: StateStore, connection: int = CONNECTION) -> None:
    await pair_record_transient(
        store=store,
        provider=PROVIDER,
        connection_id=connection,
        model=MODEL,
        reason="server_error",
        availability=AvailabilitySettings(),
    )


async def _until(store: StateStore) -> float | None:
    record = await lockout_record(store=store, provider=PROVIDER, connection_id=CONNECTION)
    lock = record.lock_for(MODEL, store.clock())
    return None if lock is None else lock.until


async def _rows() -> list[ModelLockRecord]:
    return [row async for row in ModelLockRecord.objects.all()]


async def test_a_hinted_lock_is_in_the_database_before_the_answer(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[asyncio.Task[None]] = []

    def watched(*args: Any) -> asyncio.Task[None]:
        writes.append(persist_lock_record(*args))
        return writes[-1]

    monkeypatch.setattr(lockouts, "persist_lock_record", watched)
    store = MemoryStore(clock=fake_clock)
    until = await _hinted_lock(store)
    assert [task.done() for task in writes] == [True]  # awaited before the return

    for _ in range(3):  # a self-set lock: written in the background
        await _transient(store, connection=8)
    assert [task.done() for task in writes] == [True, False]
    await tasks.flush()
    rows = {(row.provider, row.connection_id): row for row in await _rows()}
    assert rows[(PROVIDER, CONNECTION)].expires_at == dt.datetime.fromtimestamp(until, dt.UTC)
    assert set(rows) == {(PROVIDER, CONNECTION), (PROVIDER, 8)}


async def test_a_locked_model_stays_locked_across_a_restart(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    for _ in range(3):  # three transient failures in a row lock the pair (self-set, 2 s)
        await _transient(store)
    await tasks.flush()
    until = await _until(store)
    assert until == fake_clock() + 2

    fake_clock.advance(1)
    restarted = MemoryStore(clock=fake_clock)  # a new process: same database, empty store
    await resilience_ready(restarted, chores=False)

    assert await _until(restarted) == until  # the same end, not a fresh 2 s


async def test_counting_failures_writes_nothing_until_a_lock_changes(
    fake_clock: FakeClock,
) -> None:
    store = MemoryStore(clock=fake_clock)
    await _transient(store)
    await _transient(store)
    await tasks.flush()
    assert await _rows() == []  # failure counts alone are short-lived

    await _transient(store)
    await tasks.flush()
    assert len(await _rows()) == 1


async def test_a_lifted_lock_does_not_come_back(fake_clock: FakeClock) -> None:
    store = MemoryStore(clock=fake_clock)
    await _hinted_lock(store)
    await lockout_unlock(store=store, provider=PROVIDER, model=MODEL, connection_id=CONNECTION)
    await tasks.flush()
    assert await _rows() == []

    for _ in range(3):
        await _transient(store)
    await lockout_record_success(
        store=store, provider=PROVIDER, connection_id=CONNECTION, model=MODEL
    )  # the probe succeeded: the self-set lock goes
    await tasks.flush()
    restarted = MemoryStore(clock=fake_clock)
    await resilience_ready(restarted, chores=False)
    assert await _until(restarted) is None


async def test_restore_keeps_a_live_record_unless_the_database_wins(
    fake_clock: FakeClock,
) -> None:
    store = MemoryStore(clock=fake_clock)
    until = await _hinted_lock(store)
    rows = await database_sync_to_async(persisted_lock_records)(fake_clock())
    await lockout_unlock(store=store, provider=PROVIDER, model=MODEL, connection_id=CONNECTION)
    await _transient(store)  # the store has a record for the connection again, without a lock

    assert await lockout_restore(store=store, rows=rows) == 0
    assert await _until(store) is None
    assert await lockout_restore(store=store, rows=rows, overwrite=True) == 1
    assert await _until(store) == until
    await tasks.flush()


async def test_rows_whose_locks_ended_are_dropped_not_restored(fake_clock: FakeClock) -> None:
    until = await _hinted_lock(MemoryStore(clock=fake_clock))
    fake_clock.advance(until - fake_clock() + 1)

    assert await database_sync_to_async(persisted_lock_records)(fake_clock()) == {}
    assert await _rows() == []


async def test_the_listing_restores_before_it_reads(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator who asks for the locks before the restarted process served a request sees
    them (and an unlock then is not undone by a later restore)."""
    await _hinted_lock(MemoryStore(clock=fake_clock))
    restarted = MemoryStore(clock=fake_clock)
    monkeypatch.setattr(lockout_operations, "get_store", lambda: restarted)

    listed = await database_sync_to_async(lockout_operations.lockouts_active)()
    assert [(row.lock.provider, row.lock.model) for row in listed] == [(PROVIDER, MODEL)]
