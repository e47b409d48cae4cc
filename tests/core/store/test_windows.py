"""Contract tests of the state store, run against every backend with a fake clock: sliding
windows, holder semaphores, and how the key families share names and ``clear_prefix``.

The ``redis`` cases need a server at ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); they
are skipped when it is unreachable, unless ``CI=true`` in which case they fail.
"""

from __future__ import annotations

import pytest

from omniroute.core.store import StateStore
from tests.resilience.conftest import FakeClock

# -- sliding windows -----------------------------------------------------------------------


async def test_window_drops_old_events_as_clock_moves(store: StateStore, clock: FakeClock) -> None:
    assert await store.window_add("fails", window=10) == 1  # t0
    clock.advance(4)
    assert await store.window_add("fails", window=10) == 2  # t0 + 4
    clock.advance(4)
    assert await store.window_add("fails", window=10) == 3  # t0 + 8
    assert await store.window_count("fails", window=10) == 3
    assert await store.window_count("fails", window=5) == 2
    clock.advance(2)  # t0 + 10: the t0 event has left the window
    assert await store.window_count("fails", window=10) == 2
    assert await store.window_add("fails", window=10) == 3
    clock.advance(8)  # t0 + 18: only the events of t0 + 10 and later remain
    assert await store.window_count("fails", window=10) == 1
    clock.advance(100)
    assert await store.window_count("fails", window=10) == 0
    assert await store.window_add("fails", window=10) == 1


async def test_window_amount_and_clear(store: StateStore, clock: FakeClock) -> None:
    assert await store.window_add("tokens", window=60, amount=1000) == 1000
    assert await store.window_add("tokens", window=60, amount=500) == 1500
    clock.advance(30)
    assert await store.window_add("tokens", window=60, amount=1) == 1501
    clock.advance(30)
    assert await store.window_count("tokens", window=60) == 1
    await store.window_clear("tokens")
    assert await store.window_count("tokens", window=60) == 0
    await store.window_clear("never-used")


async def test_window_rejects_bad_arguments(store: StateStore) -> None:
    with pytest.raises(ValueError):
        await store.window_add("w", window=0)
    with pytest.raises(ValueError):
        await store.window_add("w", window=10, amount=0)
    with pytest.raises(ValueError):
        await store.window_count("w", window=-1)


# -- semaphores ----------------------------------------------------------------------------


async def test_semaphore_limit_reacquire_and_release(store: StateStore) -> None:
    assert await store.semaphore_acquire("acct", "a", limit=2, ttl=30) is True
    assert await store.semaphore_acquire("acct", "a", limit=2, ttl=30) is True  # same holder
    assert await store.semaphore_count("acct") == 1
    assert await store.semaphore_acquire("acct", "b", limit=2, ttl=30) is True
    assert await store.semaphore_acquire("acct", "c", limit=2, ttl=30) is False
    assert await store.semaphore_acquire("acct", "a", limit=2, ttl=30) is True  # still holds
    assert await store.semaphore_count("acct") == 2
    assert await store.semaphore_release("acct", "a") is True
    assert await store.semaphore_release("acct", "a") is False
    assert await store.semaphore_acquire("acct", "c", limit=2, ttl=30) is True
    assert await store.semaphore_count("acct") == 2
    assert await store.semaphore_count("other") == 0


async def test_semaphore_dead_holder_expires(store: StateStore, clock: FakeClock) -> None:
    assert await store.semaphore_acquire("acct", "dead", limit=1, ttl=10)
    assert await store.semaphore_acquire("acct", "alive", limit=1, ttl=10) is False
    clock.advance(10)  # the dead holder never refreshed: its slot comes back
    assert await store.semaphore_count("acct") == 0
    assert await store.semaphore_acquire("acct", "alive", limit=1, ttl=10) is True
    assert await store.semaphore_refresh("acct", "dead", ttl=10) is False
    assert await store.semaphore_release("acct", "dead") is False


async def test_semaphore_refresh_extends(store: StateStore, clock: FakeClock) -> None:
    assert await store.semaphore_acquire("acct", "a", limit=1, ttl=10)
    clock.advance(8)
    assert await store.semaphore_refresh("acct", "a", ttl=10) is True  # now until t0 + 18
    assert await store.semaphore_refresh("acct", "nobody", ttl=10) is False
    clock.advance(8)
    assert await store.semaphore_count("acct") == 1
    assert await store.semaphore_acquire("acct", "b", limit=1, ttl=10) is False
    clock.advance(2)
    assert await store.semaphore_count("acct") == 0
    assert await store.semaphore_release("acct", "a") is False


async def test_semaphore_holders_with_different_ttls(store: StateStore, clock: FakeClock) -> None:
    assert await store.semaphore_acquire("acct", "long", limit=2, ttl=100)
    assert await store.semaphore_acquire("acct", "short", limit=2, ttl=1)
    clock.advance(1)
    assert await store.semaphore_count("acct") == 1
    assert await store.semaphore_acquire("acct", "next", limit=2, ttl=1)
    assert await store.semaphore_acquire("acct", "late", limit=2, ttl=1) is False


# -- keys and maintenance ------------------------------------------------------------------


async def test_families_do_not_clash(store: StateStore) -> None:
    await store.set("same", {"record": True})
    await store.window_add("same", window=10, amount=3)
    await store.semaphore_acquire("same", "h", limit=1, ttl=10)
    assert await store.get("same") == {"record": True}
    assert await store.window_count("same", window=10) == 3
    assert await store.semaphore_count("same") == 1
    assert await store.delete("same") is True
    assert await store.window_count("same", window=10) == 3
    assert await store.semaphore_count("same") == 1


async def test_clear_prefix(store: StateStore) -> None:
    await store.set("acct:1:breaker", 1)
    await store.incr("acct:1:hits")
    await store.window_add("acct:1:fails", window=60)
    await store.semaphore_acquire("acct:1:slots", "h", limit=1, ttl=60)
    await store.set("acct:2:breaker", 2)
    assert await store.clear_prefix("acct:1:") == 4
    assert await store.scan("") == {"acct:2:breaker": 2}
    assert await store.window_count("acct:1:fails", window=60) == 0
    assert await store.semaphore_count("acct:1:slots") == 0
    assert await store.clear_prefix("") == 1
    assert await store.clear_prefix("") == 0
