"""State store tests beyond the single-task contract: concurrent updates across tasks,
threads and processes (with ``store_worker.py``), what only Redis does (WATCH retries, key prefix
and physical ttl backstop, one client per event loop) or only memory does (the expiry sweep),
and the ``build_store`` factory.

The ``redis`` cases need a server at ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); they
are skipped when it is unreachable, unless ``CI=true`` in which case they fail.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import redis
import redis.asyncio

from omniroute.core.store import (
    Json,
    MemoryStore,
    RedisStore,
    StateStore,
    StoreConflictError,
    build_store,
)
from tests.core import store_worker
from tests.core.store.support import (
    PROCESS_TIMEOUT,
    PROJECT_ROOT,
    REDIS_URL,
    redis_store_on_prefix,
    require_redis,
)
from tests.databases import redis_prefix
from tests.resilience.conftest import FakeClock

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
    async with redis_store_on_prefix(clock=None) as store:  # the workers use the real clock too
        procs = [
            await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "tests.core.store_worker"),
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
    store = RedisStore(REDIS_URL, prefix=redis_prefix())

    async def step(expected: int) -> None:
        await require_redis()
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
