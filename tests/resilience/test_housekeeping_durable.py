"""Durable state an upper layer hands in (``RoutingHooks.durable_states``) is restored with the
breakers (the database winning after an outage), swept with them, and one that fails to
restore never stops the others."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from omniroute.core.store import MemoryStore, StateStore
from resilience.hooks import DurableRestore, DurableState, replaced_hooks
from resilience.services import housekeeping
from resilience.services.housekeeping import RESTORE_MARKER_KEY, resilience_ready
from tests.resilience.conftest import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def only_ours() -> Iterator[list[tuple[str, bool]]]:
    """No other durable state runs; the calls of the ones a test hands in, in order."""
    with replaced_hooks(durable_states=()):
        yield []


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
    broken = DurableState("broken", restore=restorer("broken", only_ours, fails=True))
    pins = DurableState("pins", restore=restorer("pins", only_ours))
    store = MemoryStore(clock=fake_clock)

    with replaced_hooks(durable_states=(broken, pins)):
        await resilience_ready(store, chores=False)
        await resilience_ready(store, chores=False)  # once per store

    assert only_ours == [("broken", False), ("pins", False)]
    assert await store.get("pins:restored") is True
    assert await store.get(RESTORE_MARKER_KEY) is True  # the failure stopped nothing


async def test_after_an_outage_the_database_wins(
    fake_clock: FakeClock, only_ours: list[tuple[str, bool]]
) -> None:
    pins = DurableState("pins", restore=restorer("pins", only_ours))

    with replaced_hooks(durable_states=(pins,)):
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

    pins = DurableState("pins", restore=restorer("pins", only_ours), sweep=sweep)
    store = MemoryStore(clock=fake_clock)
    await store.set(RESTORE_MARKER_KEY, True)

    with replaced_hooks(durable_states=(pins,)):
        await housekeeping._check_store(store, sweep=False)
        assert swept == []
        await housekeeping._check_store(store, sweep=True)
    assert swept == [store]
