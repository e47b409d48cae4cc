"""Contract tests of the state store, run against every backend with a fake clock.

Run: ``.venv/bin/pytest tests/resilience/test_store.py -p no:django``.  The Redis cases need a
server at ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); they are skipped when it is
unreachable, unless ``CI=true`` in which case they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

import pytest
import redis
import redis.asyncio
from redis.exceptions import RedisError

from resilience.store import (
    Json,
    MemoryStore,
    RedisStore,
    StateStore,
    StoreConflictError,
    build_store,
)
from tests.resilience import store_worker

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT = 60.0


class FakeClock:
    """Mutable clock: ``clock()`` returns the current fake time; tests ``advance`` it."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def _require_redis() -> None:
    client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        message = f"Redis not reachable at {REDIS_URL}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    finally:
        await client.aclose()


@asynccontextmanager
async def _redis_store(clock: FakeClock | None) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` on a unique prefix, emptied and closed afterwards."""
    await _require_redis()
    prefix = f"omniroute-test:{uuid4().hex}:"
    store = RedisStore(REDIS_URL, prefix=prefix, clock=clock or time.time)
    try:
        yield store
    finally:
        await store.clear_prefix("")
        await store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[StateStore]:
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    async with _redis_store(clock) as redis_store:
        yield redis_store


@pytest.fixture
async def redis_store(clock: FakeClock) -> AsyncIterator[RedisStore]:
    async with _redis_store(clock) as redis_store:
        yield redis_store


# -- counters ------------------------------------------------------------------------------


async def test_incr_counts_from_zero(store: StateStore) -> None:
    assert await store.get_counter("hits") == 0
    assert await store.incr("hits") == 1
    assert await store.incr("hits", 5) == 6
    assert await store.incr("hits", -2) == 4
    assert await store.get_counter("hits") == 4
    assert await store.get("hits") == 4


async def test_incr_ttl_is_set_on_creation_and_kept(store: StateStore, clock: FakeClock) -> None:
    assert await store.incr("errors", ttl=10) == 1
    clock.advance(6)
    assert await store.incr("errors", ttl=10) == 2  # does not push the expiry back
    clock.advance(3.9)
    assert await store.get_counter("errors") == 2
    clock.advance(0.1)  # t0 + 10: expired
    assert await store.get_counter("errors") == 0
    assert await store.incr("errors", ttl=10) == 1  # a fresh counter with a fresh ttl
    clock.advance(9.5)
    assert await store.get_counter("errors") == 1


async def test_incr_without_ttl_never_expires(store: StateStore, clock: FakeClock) -> None:
    await store.incr("total", 3)
    clock.advance(10**7)
    assert await store.get_counter("total") == 3


async def test_incr_on_non_integer_record_raises(store: StateStore) -> None:
    values: list[Json] = [{"a": 1}, "7", 1.5, True]
    for value in values:
        await store.set("odd", value)
        with pytest.raises(TypeError):
            await store.incr("odd")
        with pytest.raises(TypeError):
            await store.get_counter("odd")
    assert await store.get("odd") is True


# -- records -------------------------------------------------------------------------------


async def test_get_set_delete(store: StateStore) -> None:
    assert await store.get("breaker") is None
    await store.set("breaker", {"state": "open", "failures": 3})
    assert await store.get("breaker") == {"state": "open", "failures": 3}
    await store.set("breaker", "closed")
    assert await store.get("breaker") == "closed"
    assert await store.delete("breaker") is True
    assert await store.delete("breaker") is False
    assert await store.get("breaker") is None


async def test_set_with_ttl_expires(store: StateStore, clock: FakeClock) -> None:
    await store.set("cooldown", {"until": 5}, ttl=30)
    clock.advance(29.99)
    assert await store.get("cooldown") == {"until": 5}
    clock.advance(0.01)
    assert await store.get("cooldown") is None
    assert await store.delete("cooldown") is False  # nothing live was removed


async def test_set_replaces_the_expiry(store: StateStore, clock: FakeClock) -> None:
    await store.set("k", 1, ttl=5)
    await store.set("k", 2)  # no ttl: never expires
    clock.advance(100)
    assert await store.get("k") == 2
    await store.set("k", 3, ttl=1)
    clock.advance(1)
    assert await store.get("k") is None


async def test_set_none_deletes(store: StateStore) -> None:
    await store.set("k", [1])
    await store.set("k", None)
    assert await store.get("k") is None
    assert await store.scan("") == {}


async def test_values_round_trip_through_json(store: StateStore) -> None:
    value: Json = {"list": [1, 2.5, "x", None, True], "nested": {"a": {}}}
    await store.set("v", value)
    fetched = await store.get("v")
    assert fetched == value
    assert isinstance(fetched, dict)
    fetched["list"] = []  # callers get copies, never the stored object
    assert await store.get("v") == value
    await store.set("t", ("a", 1))  # type: ignore[arg-type]
    assert await store.get("t") == ["a", 1]


async def test_set_rejects_non_json(store: StateStore) -> None:
    with pytest.raises(TypeError):
        await store.set("bad", {"when": object()})  # type: ignore[dict-item]
    assert await store.get("bad") is None


async def test_update_creates_modifies_and_deletes(store: StateStore) -> None:
    seen: list[Json | None] = []

    def bump(current: Json | None) -> Json | None:
        seen.append(current)
        if current is None:
            return {"n": 1}
        assert isinstance(current, dict) and isinstance(current["n"], int)
        return None if current["n"] >= 2 else {"n": current["n"] + 1}

    assert await store.update("rec", bump) == {"n": 1}
    assert await store.update("rec", bump) == {"n": 2}
    assert await store.get("rec") == {"n": 2}
    assert await store.update("rec", bump) is None
    assert await store.get("rec") is None
    assert seen == [None, {"n": 1}, {"n": 2}]


async def test_update_ttl(store: StateStore, clock: FakeClock) -> None:
    await store.update("rec", lambda _: "a", ttl=10)
    clock.advance(9)
    assert await store.get("rec") == "a"
    assert await store.update("rec", lambda cur: f"{cur}b", ttl=10) == "ab"  # new ttl from now
    clock.advance(9)
    assert await store.get("rec") == "ab"
    clock.advance(1)
    assert await store.update("rec", lambda cur: repr(cur)) == "None"  # expired: sees None
    clock.advance(10**6)
    assert await store.get("rec") == "None"  # ttl None: no expiry


async def test_update_error_leaves_record_untouched(store: StateStore) -> None:
    await store.set("rec", {"n": 1}, ttl=60)

    def boom(current: Json | None) -> Json | None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await store.update("rec", boom)
    assert await store.get("rec") == {"n": 1}


async def test_update_returns_json_round_tripped_value(store: StateStore) -> None:
    assert await store.update("t", lambda _: ("a", 1)) == ["a", 1]  # type: ignore[arg-type,return-value]


async def test_scan_by_prefix_ignores_expired(store: StateStore, clock: FakeClock) -> None:
    await store.set("breaker:a", {"state": "open"})
    await store.set("breaker:b", {"state": "closed"}, ttl=5)
    await store.set("breaker:c", "gone soon", ttl=1)
    await store.incr("breaker:count")
    await store.set("cooldown:a", 1)
    await store.set("odd*[key]?", 2)
    await store.window_add("breaker:window", window=60)
    await store.semaphore_acquire("breaker:slots", "h", limit=1, ttl=60)
    clock.advance(1)
    assert await store.scan("breaker:") == {
        "breaker:a": {"state": "open"},
        "breaker:b": {"state": "closed"},
        "breaker:count": 1,
    }
    assert await store.scan("odd*") == {"odd*[key]?": 2}  # glob characters are literal
    assert await store.scan("odd?") == {}
    assert len(await store.scan("")) == 5
    clock.advance(4)
    assert set(await store.scan("breaker:")) == {"breaker:a", "breaker:count"}


async def test_scan_many_keys(store: StateStore) -> None:
    for i in range(1200):
        await store.set(f"bulk:{i}", i)
    found = await store.scan("bulk:")
    assert found == {f"bulk:{i}": i for i in range(1200)}
    assert await store.clear_prefix("bulk:") == 1200


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


# -- concurrency ---------------------------------------------------------------------------


def _plus_one(current: Json | None) -> Json:
    assert current is None or isinstance(current, int)
    return (current or 0) + 1


async def test_concurrent_updates_are_not_lost(store: StateStore) -> None:
    results = await asyncio.gather(*(store.update("n", _plus_one) for _ in range(200)))
    assert await store.get("n") == 200
    assert sorted(results) == list(range(1, 201))  # type: ignore[type-var]


async def test_concurrent_incr(store: StateStore) -> None:
    results = await asyncio.gather(*(store.incr("c", ttl=60) for _ in range(200)))
    assert sorted(results) == list(range(1, 201))
    assert await store.get_counter("c") == 200


async def test_concurrent_semaphore_acquire(store: StateStore) -> None:
    results = await asyncio.gather(
        *(store.semaphore_acquire("s", f"h{i}", limit=7, ttl=60) for i in range(100))
    )
    assert results.count(True) == 7
    assert await store.semaphore_count("s") == 7


async def test_two_threads_with_their_own_loops(store: StateStore) -> None:
    """Two threads, each with its own event loop, share one store object."""

    async def thread_main(worker: int) -> dict[str, int]:
        try:
            return await store_worker.run_workload(store, worker, workers=2)
        finally:
            await store.close()  # closes only this thread's loop client

    runs = (asyncio.to_thread(asyncio.run, thread_main(worker)) for worker in range(2))
    stats = await asyncio.wait_for(asyncio.gather(*runs), timeout=PROCESS_TIMEOUT)
    assert await store.get("record") == 2 * store_worker.UPDATES
    assert await store.get_counter("counter") == 2 * store_worker.INCRS
    assert sum(s["acquired"] for s in stats) == store_worker.LIMIT
    assert await store.semaphore_count("slots") == store_worker.LIMIT


@pytest.mark.redis
async def test_two_processes_share_redis_state() -> None:
    async with _redis_store(clock=None) as store:  # the workers use the real clock too
        procs = [
            await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "tests.resilience.store_worker"),
                *(REDIS_URL, store.prefix, str(worker), "2"),
                cwd=PROJECT_ROOT,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for worker in range(2)
        ]
        try:
            outputs = await asyncio.wait_for(
                asyncio.gather(*(proc.communicate() for proc in procs)), timeout=PROCESS_TIMEOUT
            )
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
        for proc, (_, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, err.decode()
        stats = [json.loads(out) for out, _ in outputs]
        assert await store.get("record") == 2 * store_worker.UPDATES
        assert await store.get_counter("counter") == 2 * store_worker.INCRS
        assert sum(s["acquired"] for s in stats) == store_worker.LIMIT
        assert await store.semaphore_count("slots") == store_worker.LIMIT
        print("update fn calls per worker (300 = no WATCH retry):", stats)


# -- Redis specifics -----------------------------------------------------------------------


@pytest.mark.redis
async def test_update_retries_when_the_record_changes_underneath(redis_store: RedisStore) -> None:
    raw_key = redis_store._key("r:", "rec")
    seen: list[Json | None] = []

    def meddle(current: Json | None) -> Json:
        seen.append(current)
        if len(seen) == 1:  # another client writes between our WATCH and EXEC
            with redis.Redis.from_url(REDIS_URL) as other:
                other.hset(raw_key, "v", b"100")
        return _plus_one(current)

    assert await redis_store.update("rec", meddle) == 101
    assert seen == [None, 100]
    assert await redis_store.get("rec") == 101


@pytest.mark.redis
async def test_update_gives_up_after_retry_budget(redis_store: RedisStore) -> None:
    redis_store.max_update_retries = 2
    raw_key = redis_store._key("r:", "rec")
    calls = 0

    def always_meddle(current: Json | None) -> Json:
        nonlocal calls
        calls += 1
        with redis.Redis.from_url(REDIS_URL) as other:
            other.hset(raw_key, "v", str(calls))
        return "mine"

    with pytest.raises(StoreConflictError):
        await redis_store.update("rec", always_meddle)
    assert calls == 3
    assert await redis_store.get("rec") == 3


@pytest.mark.redis
async def test_keys_are_prefixed_and_have_a_physical_backstop(redis_store: RedisStore) -> None:
    await redis_store.set("forever", 1)
    await redis_store.set("brief", 1, ttl=5)
    await redis_store.incr("counter", ttl=5)
    await redis_store.window_add("win", window=5)
    await redis_store.semaphore_acquire("sem", "h", limit=1, ttl=5)
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    try:
        keys = sorted([k.decode() async for k in client.scan_iter(f"{redis_store.prefix}*")])
        suffixes = [k.removeprefix(redis_store.prefix) for k in keys]
        assert suffixes == ["r:brief", "r:counter", "r:forever", "s:sem", "w:win"]
        assert await client.pttl(f"{redis_store.prefix}r:forever") == -1
        for name in ("r:brief", "r:counter", "s:sem", "w:win"):
            assert 60_000 < await client.pttl(f"{redis_store.prefix}{name}") <= 65_000
    finally:
        await client.aclose()


@pytest.mark.redis
def test_redis_store_follows_the_running_loop() -> None:
    """A store object survives its event loop: each new loop gets its own client."""
    store = RedisStore(REDIS_URL, prefix=f"omniroute-test:{uuid4().hex}:")

    async def step(expected: int) -> None:
        await _require_redis()
        assert await store.incr("n") == expected

    asyncio.run(step(1))  # leaves a client bound to a now-closed loop
    asyncio.run(step(2))

    async def cleanup() -> None:
        assert await store.clear_prefix("") == 1
        await store.close()

    asyncio.run(cleanup())


# -- memory specifics ----------------------------------------------------------------------


async def test_memory_sweep_drops_expired_keys(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    for i in range(100):
        await store.set(f"k{i}", i, ttl=1)
        await store.incr(f"c{i}", ttl=1)
        await store.window_add(f"w{i}", window=1)
        await store.semaphore_acquire(f"s{i}", "h", limit=1, ttl=1)
    await store.set("keep", 1)
    clock.advance(MemoryStore.SWEEP_INTERVAL + 61)
    assert await store.get("keep") == 1  # any call may trigger the sweep
    assert (len(store._records), len(store._windows), len(store._semaphores)) == (1, 0, 0)


# -- factory -------------------------------------------------------------------------------


async def test_build_store(clock: FakeClock) -> None:
    assert isinstance(build_store(None, clock=clock), MemoryStore)
    assert isinstance(build_store("", clock=clock), MemoryStore)
    built = build_store(REDIS_URL, prefix="x:", clock=clock)
    assert isinstance(built, RedisStore)
    assert (built.prefix, built.clock) == ("x:", clock)
