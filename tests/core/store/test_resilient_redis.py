"""``ResilientStore`` and ``RedisStore`` against a real ``redis-server`` that is killed and
restarted (SIGKILL, then the same port, empty): calls keep answering from process-local state
while it is down, shared state comes back without recreating the store, a pooled
connection made stale by the restart is replaced instead of failing the first call, and a
restart between two calls is noticed by the next one (the durable state is put back first).

The server is this module's own (``tests/redis_server.py``); the retry interval runs on a fake
monotonic clock, so the tests never sleep through it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from omniroute.core.store import RESTORING, Json, RedisStore, StoreRestartedError
from omniroute.core.store.resilient import ResilientStore
from tests.databases import redis_prefix
from tests.redis_server import RedisServer, running_redis
from tests.resilience.conftest import FakeClock

# Generous: these tests are about outages, not about the timeout's value (a loaded machine
# may take longer than the production 50 ms to open the first connections).
TIMEOUT_SECONDS = 1.0
INTERVAL = 1.0


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with running_redis() as running:
        yield running


@pytest.fixture
async def prefix() -> str:
    return redis_prefix()


@pytest.fixture
async def other(server: RedisServer, prefix: str) -> AsyncIterator[RedisStore]:
    """Another process's view of the same Redis keys."""
    store = RedisStore(server.url, prefix=prefix)
    yield store
    await store.close()


async def test_an_outage_is_served_locally_and_sharing_resumes_after_it(
    server: RedisServer, other: RedisStore, prefix: str
) -> None:
    monotonic = FakeClock(start=0.0)
    store = ResilientStore(
        RedisStore(server.url, prefix=prefix),
        timeout=TIMEOUT_SECONDS,
        retry_interval=INTERVAL,
        monotonic=monotonic,
    )
    recoveries: list[bool] = []

    async def recovered() -> None:
        recoveries.append(store.degraded)

    store.on_recovered(recovered)
    try:
        # given: a shared counter, then the server dies mid-sequence and comes back
        answers = []
        for step in range(30):
            if step == 10:
                server.kill()
            if step == 20:
                server.start()
                monotonic.advance(INTERVAL)
            answers.append(await store.incr("n"))
            assert await store.get("missing") is None
            if step == 15:
                assert store.degraded
                assert "ConnectionError" in (store.degraded_reason or "")

        # then: every call answered; the outage counted locally; Redis restarted empty
        assert answers == [*range(1, 11), *range(1, 11), *range(1, 11)]
        assert not store.degraded and store.degraded_reason is None
        assert recoveries == [False]
        assert await store.fallback.scan("") == {}
        await store.set("after", {"shared": True})
        assert await other.get("after") == {"shared": True}
        assert await other.get_counter("n") == 10
    finally:
        await store.clear_prefix("")
        await store.close()


async def test_calls_keep_answering_while_the_server_is_down(
    server: RedisServer, prefix: str
) -> None:
    store = ResilientStore(
        RedisStore(server.url, prefix=prefix), timeout=TIMEOUT_SECONDS, monotonic=FakeClock()
    )
    try:
        await store.set("k", 1)
        server.kill()

        assert await store.update("k", lambda v: [v]) == [None]
        assert await store.semaphore_acquire("s", "h", limit=1, ttl=5)
        assert not await store.semaphore_acquire("s", "other", limit=1, ttl=5)
        assert await store.window_add("w", window=5, amount=2) == 2
        assert await store.scan("") == {"k": [None]}
        assert await store.delete("k")
        assert store.degraded
    finally:
        await store.close()


def _update(store: RedisStore) -> Awaitable[Json | None]:
    return store.update("u", lambda v: 1 if v is None else v)


OPERATIONS: dict[str, Callable[[RedisStore], Awaitable[object]]] = {
    "get": lambda store: store.get("k"),
    "set": lambda store: store.set("k", 1, ttl=5),
    "update": _update,
    "incr (script)": lambda store: store.incr("n", ttl=5),
    "window_add (script)": lambda store: store.window_add("w", window=5),
    "semaphore_acquire (script)": lambda store: store.semaphore_acquire("s", "h", limit=1, ttl=5),
    "scan": lambda store: store.scan(""),
}


async def test_the_first_call_after_a_restart_succeeds(server: RedisServer, prefix: str) -> None:
    store = RedisStore(server.url, prefix=prefix)
    try:
        for name, operation in OPERATIONS.items():
            await operation(store)  # the pool holds a live connection
            server.restart()
            try:
                await operation(store)  # ... which is stale now: dropped and retried
            except Exception as error:  # pragma: no cover - the failure message
                pytest.fail(f"{name} failed on a stale connection: {error!r}")
    finally:
        await store.close()


async def test_a_restart_does_not_degrade_the_resilient_store(
    server: RedisServer, prefix: str
) -> None:
    store = ResilientStore(
        RedisStore(server.url, prefix=prefix), timeout=TIMEOUT_SECONDS, monotonic=FakeClock()
    )
    try:
        await store.set("k", "before")
        server.restart()

        assert await store.get("k") is None  # Redis itself came back empty
        assert not store.degraded
    finally:
        await store.close()


async def test_a_restarted_server_is_refused_until_the_restart_is_accepted(
    server: RedisServer, prefix: str
) -> None:
    store = RedisStore(server.url, prefix=prefix)
    store.refuse_restarted()
    try:
        await store.set("k", "before")
        server.restart()

        with pytest.raises(StoreRestartedError) as refused:
            await store.get("k")
        with pytest.raises(StoreRestartedError):
            await store.set("refused", 1)  # a new connection: refused again, nothing sent
        restoring = RESTORING.set(True)
        try:
            await store.set("k", "restored")  # putting durable state back goes through
        finally:
            RESTORING.reset(restoring)
        refused.value.accept()

        assert await store.get("k") == "restored"
        assert await store.get("refused") is None
        server.restart()  # and the next restart is noticed too
        with pytest.raises(StoreRestartedError):
            await store.get("k")
    finally:
        await store.close()


async def test_a_restart_between_calls_restores_before_the_next_read(
    server: RedisServer, prefix: str, other: RedisStore
) -> None:
    store = ResilientStore(
        RedisStore(server.url, prefix=prefix), timeout=TIMEOUT_SECONDS, monotonic=FakeClock()
    )

    async def restore() -> None:
        await store.set("durable", "from the database")

    store.on_recovered(restore)
    try:
        await store.set("durable", "from the database")
        server.restart()

        assert await store.get("durable") == "from the database"
        assert await other.get("durable") == "from the database"
        assert not store.degraded
    finally:
        await store.close()


async def test_a_hung_server_is_bounded_and_leaves_no_stale_reply(
    server: RedisServer, prefix: str
) -> None:
    primary = RedisStore(server.url, prefix=prefix, max_connections=2)
    monotonic = FakeClock(start=0.0)
    store = ResilientStore(primary, timeout=0.05, retry_interval=INTERVAL, monotonic=monotonic)
    try:
        await primary.set("a", "A")
        await primary.set("b", "B")

        server.pause()
        started = time.monotonic()
        assert await store.get("a") is None  # answered locally, within the bound
        assert time.monotonic() - started < 1.0
        assert store.degraded and "StoreTimeoutError" in (store.degraded_reason or "")
        server.resume()

        # the abandoned call was cut mid-reply: its connection must not serve "A" to others
        for _ in range(4):
            assert await primary.get("b") == "B"
            assert await primary.get("a") == "A"
        monotonic.advance(INTERVAL)
        assert await store.get("a") == "A"
        assert not store.degraded
    finally:
        server.resume()
        await store.close()
