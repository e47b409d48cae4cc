"""Durable state an upper layer registers (``register_durable_state``) is restored with the
breakers (the database winning after an outage), swept with them, and one that fails to
restore never stops the others."""

from __future__ import annotations

import pytest

from resilience.services import housekeeping
from resilience.services.housekeeping import (
    RESTORE_MARKER_KEY,
    DurableRestore,
    register_durable_state,
    resilience_ready,
)
from resilience.store import MemoryStore, StateStore
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def only_ours(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """No other registration runs; the calls of the ones a test makes, in order."""
    monkeypatch.setattr(housekeeping, "_durables", {})
    return []


def restorer(name: str, calls: list[tuple[str, bool]], *, fails: bool = False) -> DurableRestore:
    async def restore(store: StateStore, overwrite: bool) -> int:
        calls.append((name, overwrite))
        if fails:
            raise RuntimeError("the table is gone")
        await store.set(f"{name}:restored", True)
        return 1

    return restore


async def test_registered_state_is_restored_with_the_breakers(
    fake_clock: FakeClock, only_ours: list[tuple[str, bool]]
) -> None:
    register_durable_state("broken", restore=restorer("broken", only_ours, fails=True))
    register_durable_state("pins", restore=restorer("pins", only_ours))
    store = MemoryStore(clock=fake_clock)

    await resilience_ready(store, chores=False)
    await resilience_ready(store, chores=False)  # once per store

    assert only_ours == [("broken", False), ("pins", False)]
    assert await store.get("pins:restored") is True
    assert await store.get(RESTORE_MARKER_KEY) is True  # the failure stopped nothing


async def test_after_an_outage_the_database_wins(
    fake_clock: FakeClock, only_ours: list[tuple[str, bool]]
) -> None:
    register_durable_state("pins", restore=restorer("pins", only_ours))

    await housekeeping._restore(MemoryStore(clock=fake_clock), overwrite=True)
    await housekeeping.housekeeping_settle()  # soft state: restored in the background

    assert only_ours == [("pins", True)]


async def test_registered_state_is_swept_with_the_breakers(
    fake_clock: FakeClock, only_ours: list[tuple[str, bool]]
) -> None:
    swept: list[StateStore] = []

    async def sweep(store: StateStore) -> int:
        swept.append(store)
        raise RuntimeError("a sweep that fails is logged, never raised")

    register_durable_state("pins", restore=restorer("pins", only_ours), sweep=sweep)
    store = MemoryStore(clock=fake_clock)
    await store.set(RESTORE_MARKER_KEY, True)

    await housekeeping._check_store(store, sweep=False)
    assert swept == []
    await housekeeping._check_store(store, sweep=True)
    assert swept == [store]
