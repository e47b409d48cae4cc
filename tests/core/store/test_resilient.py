"""``ResilientStore`` over a primary that fails or stalls on command (pure asyncio).

The primary is a ``MemoryStore`` behind a switch: ``up`` answers, ``down`` raises the error a
refused Redis connection raises, ``stall`` never answers. The retry interval runs on a fake
monotonic clock, so no test sleeps through it; only the stall cases wait for the (tiny) timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
from pytest_django.fixtures import Settings
from redis.exceptions import ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from omniroute.core import state as resilience_state
from omniroute.core.store import Json, MemoryStore, RedisStore, StateStore, StoreConflictError
from omniroute.core.store.resilient import ResilientStore
from tests.core.store.switched import REFUSED, SwitchedStore
from tests.resilience.conftest import FakeClock

INTERVAL = 2.0
TIMEOUT = 0.01


async def settle() -> None:
    """Let every ready task run until it waits on something."""
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.fixture
def monotonic() -> FakeClock:
    return FakeClock(start=100.0)


@pytest.fixture
def primary(clock: FakeClock) -> SwitchedStore:
    return SwitchedStore(clock)


@pytest.fixture
def resilient(primary: SwitchedStore, monotonic: FakeClock) -> ResilientStore:
    return ResilientStore(
        cast(StateStore, primary), timeout=TIMEOUT, retry_interval=INTERVAL, monotonic=monotonic
    )


async def test_a_healthy_primary_serves_every_call(
    resilient: ResilientStore, primary: SwitchedStore, clock: FakeClock
) -> None:
    assert resilient.clock is clock and resilient.fallback.clock is clock
    await resilient.set("k", {"a": 1})
    assert await resilient.incr("n") == 1
    assert await primary.inner.get("k") == {"a": 1}
    assert await resilient.get_many(["k", "n"]) == [{"a": 1}, 1]
    assert await resilient.fallback.scan("") == {}
    assert (resilient.degraded, resilient.degraded_reason, resilient.degraded_since) == (
        False,
        None,
        None,
    )


async def test_a_refused_connection_is_served_from_the_fallback(
    resilient: ResilientStore, primary: SwitchedStore, clock: FakeClock
) -> None:
    await resilient.incr("n")
    primary.mode = "down"

    assert await resilient.incr("n") == 1  # process-local state starts empty
    await resilient.set("k", "v")
    assert await resilient.get("k") == "v"
    assert await resilient.semaphore_acquire("s", "h", limit=1, ttl=5)
    assert await resilient.window_add("w", window=5) == 1
    assert await resilient.get_many(["k", "n", "absent"]) == ["v", 1, None]

    assert resilient.degraded
    assert resilient.degraded_reason == f"ConnectionError: {REFUSED}"
    assert resilient.degraded_since == clock()
    assert await primary.inner.get_counter("n") == 1


async def test_while_degraded_the_primary_is_left_alone_until_the_interval_ends(
    resilient: ResilientStore, primary: SwitchedStore, monotonic: FakeClock
) -> None:
    primary.mode = "down"
    await resilient.get("k")
    assert primary.calls == 1

    for _ in range(20):
        await resilient.incr("n")
    monotonic.advance(INTERVAL - 0.1)
    await resilient.get("k")
    assert primary.calls == 1

    monotonic.advance(0.1)
    await asyncio.gather(*(resilient.incr("n") for _ in range(10)))  # one of them probes
    assert primary.calls == 2
    assert resilient.degraded
    assert await resilient.get_counter("n") == 30


async def test_a_stalled_primary_is_bounded_by_the_timeout(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    primary.mode = "stall"

    answer = await asyncio.wait_for(resilient.incr("n"), timeout=5)

    assert answer == 1
    assert resilient.degraded
    assert resilient.degraded_reason == "StoreTimeoutError: incr: no answer within 10 ms"
    await asyncio.sleep(0)  # the abandoned call is cancelled in the background
    assert primary.cancelled == 1


class AnsweredDuringAPause:
    """A primary whose answer arrives ``ANSWER_AFTER`` seconds in and takes two more loop turns
    to read (as a Redis reply is parsed), while the process is paused for ``PAUSE``."""

    ANSWER_AFTER, TIMEOUT, PAUSE = 0.05, 0.2, 0.6

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def get(self, key: str) -> Json:
        answered = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(self.ANSWER_AFTER, answered.set_result, "value")
        await answered
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return "value"


async def test_a_process_paused_past_the_timeout_reads_the_answer_that_came_meanwhile(
    clock: FakeClock,
) -> None:
    primary = AnsweredDuringAPause(clock)
    store = ResilientStore(cast(StateStore, primary), timeout=primary.TIMEOUT)
    loop = asyncio.get_running_loop()
    # The pause starts once the call waits; the answer and the timeout are both due when it ends.
    loop.call_soon(time.sleep, primary.PAUSE)

    assert await store.get("k") == "value"
    assert not store.degraded


async def test_an_update_may_run_its_function_twice(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    seen: list[Json | None] = []

    def plus_one(current: Json | None) -> Json:
        seen.append(current)
        return cast(int, current or 0) + 1

    await primary.inner.set("n", 41)

    async def slow_update(key: str, fn: Callable[[Json | None], Json], **kwargs: Any) -> Json:
        fn(await primary.inner.get(key))  # the primary ran the function, then hung
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    primary.__dict__["update"] = slow_update

    assert await resilient.update("n", plus_one) == 1
    assert seen == [41, None]


async def test_a_warning_is_logged_once_per_interval(
    resilient: ResilientStore,
    primary: SwitchedStore,
    monotonic: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="omniroute.core.store.resilient")
    primary.mode = "down"

    for _ in range(50):
        await resilient.incr("n")
    assert len(caplog.records) == 1
    assert "state store unreachable (ConnectionError" in caplog.records[0].getMessage()

    monotonic.advance(INTERVAL)
    for _ in range(50):
        await resilient.incr("n")  # the first probes and fails again
    assert len(caplog.records) == 2


async def test_recovery_drops_local_state_and_runs_the_callbacks(
    resilient: ResilientStore,
    primary: SwitchedStore,
    monotonic: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def reload() -> None:
        ran.append("reload")
        await resilient.set("restored", True)  # the callbacks see the primary again

    async def broken() -> None:
        raise RuntimeError("boom")

    resilient.on_recovered(broken)
    resilient.on_recovered(reload)
    resilient.on_recovered(reload)  # registered once
    await resilient.set("shared", 1)
    primary.mode = "down"
    await resilient.set("local", 2)
    assert await resilient.fallback.get("local") == 2

    primary.mode = "up"
    assert await resilient.get("local") == 2  # still within the interval: the fallback
    monotonic.advance(INTERVAL)
    assert await resilient.get("local") is None  # the probe: the primary answers

    assert not resilient.degraded and resilient.degraded_reason is None
    assert ran == ["reload"]
    assert await resilient.fallback.scan("") == {}
    assert await primary.inner.scan("") == {"shared": 1, "restored": True}
    assert "recovery callback" in caplog.text  # the broken one is logged, not raised
    assert await resilient.get("shared") == 1
    assert ran == ["reload"]


async def test_a_new_outage_starts_from_empty_local_state(
    resilient: ResilientStore, primary: SwitchedStore, monotonic: FakeClock
) -> None:
    primary.mode = "down"
    await resilient.set("first-outage", 1)
    primary.mode = "up"
    monotonic.advance(INTERVAL)
    await resilient.get("x")
    await resilient.fallback.set("straggler", 1)  # a late write of the first outage
    primary.mode = "down"

    assert await resilient.get("straggler") is None
    assert resilient.degraded


async def test_the_callbacks_end_before_the_primary_serves_again_after_an_outage(
    resilient: ResilientStore, primary: SwitchedStore, monotonic: FakeClock
) -> None:
    release = asyncio.Event()

    async def reload() -> None:
        await release.wait()
        await resilient.set("durable", True)

    resilient.on_recovered(reload)
    primary.mode = "down"
    await resilient.get("x")
    primary.mode = "up"
    monotonic.advance(INTERVAL)

    # when: the probe finds the primary back, and another call comes while the callbacks run
    probing = asyncio.ensure_future(resilient.get("durable"))
    await settle()
    assert not resilient.degraded
    other = asyncio.ensure_future(resilient.get("durable"))
    await settle()

    # then: neither is served before the durable state is back
    assert not probing.done() and not other.done()
    release.set()
    assert (await probing, await other) == (True, True)


async def test_a_restart_between_calls_runs_the_callbacks_then_the_call(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    ran: list[str] = []

    async def reload() -> None:
        ran.append("reload")
        await resilient.set("durable", True)  # reaches the restarted primary

    resilient.on_recovered(reload)
    await resilient.set("lost", 1)
    await primary.inner.clear_prefix("")
    primary.mode = "restarted"  # the server came back empty between two calls

    answers = await asyncio.gather(*(resilient.get("durable") for _ in range(5)))

    assert answers == [True] * 5
    assert ran == ["reload"] and primary.accepted == 5  # once for all, each refusal accepted
    assert not resilient.degraded
    assert await resilient.get("lost") is None


async def test_a_primary_that_keeps_restarting_is_served_locally(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    primary.mode = primary.after_accept = "restarted"

    assert await resilient.incr("n") == 1
    assert resilient.degraded
    assert (resilient.degraded_reason or "").startswith("Restarted")


async def test_an_outage_during_the_callbacks_runs_them_again(
    resilient: ResilientStore, primary: SwitchedStore, monotonic: FakeClock
) -> None:
    ran: list[int] = []

    async def reload() -> None:
        ran.append(len(ran))
        if len(ran) == 1:  # the primary goes away under the first run, and comes back
            primary.mode = "down"
            await resilient.set("written-locally", True)
            primary.mode = "up"
            monotonic.advance(INTERVAL)
        await resilient.set("durable", len(ran))  # the first run's is the probe

    resilient.on_recovered(reload)
    primary.mode = "restarted"

    assert await asyncio.wait_for(resilient.get("durable"), timeout=5) == 2
    assert ran == [0, 1] and not resilient.degraded


@pytest.mark.parametrize(
    "error",
    [
        RedisTimeoutError("Timeout reading from socket"),
        ReadOnlyError("You can't write against a read only replica."),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
    ],
)
async def test_outage_errors_degrade(
    resilient: ResilientStore, primary: SwitchedStore, error: Exception
) -> None:
    primary.mode, primary.error = "down", error

    assert await resilient.incr("n") == 1
    assert resilient.degraded
    assert (resilient.degraded_reason or "").startswith(type(error).__name__)


@pytest.mark.parametrize(
    "error", [TypeError("not a counter"), ValueError("bad window"), StoreConflictError("lost")]
)
async def test_contract_errors_propagate_and_do_not_degrade(
    resilient: ResilientStore, primary: SwitchedStore, error: Exception
) -> None:
    primary.mode, primary.error = "down", error

    with pytest.raises(type(error)):
        await resilient.incr("n")
    assert not resilient.degraded


async def test_real_contract_errors_of_the_primary_propagate(resilient: ResilientStore) -> None:
    await resilient.set("text", "x")
    with pytest.raises(TypeError):
        await resilient.incr("text")
    with pytest.raises(ValueError):
        await resilient.window_add("w", window=0)
    assert not resilient.degraded


async def test_a_cancelled_caller_cancels_its_primary_call(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    resilient.timeout = 60.0
    primary.mode = "stall"
    caller = asyncio.ensure_future(resilient.get("k"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)

    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.sleep(0)

    assert primary.cancelled == 1
    assert not resilient.degraded


async def test_clear_prefix_clears_both_stores(
    resilient: ResilientStore, primary: SwitchedStore
) -> None:
    await primary.inner.set("a:1", 1)
    await resilient.fallback.set("a:2", 2)

    assert await resilient.clear_prefix("a:") == 1
    assert await resilient.fallback.scan("") == {}
    assert await primary.inner.scan("") == {}


def test_the_timeout_and_interval_must_be_positive(primary: SwitchedStore) -> None:
    with pytest.raises(ValueError):
        ResilientStore(cast(StateStore, primary), timeout=0)
    with pytest.raises(ValueError):
        ResilientStore(cast(StateStore, primary), timeout=0.05, retry_interval=0)


def test_get_store_wraps_redis_with_the_store_timeout(settings: Settings) -> None:
    settings.REDIS_URL, settings.REDIS_PREFIX = "redis://127.0.0.1:6399/0", "x:"
    settings.STORE_TIMEOUT_MS = 75
    resilience_state.get_store.cache_clear()
    try:
        store = resilience_state.get_store()
        assert isinstance(store, ResilientStore)
        assert isinstance(store.primary, RedisStore) and store.primary.prefix == "x:"
        assert store.timeout == 0.075 and store.clock is store.primary.clock
        assert resilience_state.store_backend(store) == "redis"
        assert resilience_state.store_degraded_reason(store) is None
        assert resilience_state.store_is_shared()

        settings.REDIS_URL = None
        resilience_state.get_store.cache_clear()
        memory = resilience_state.get_store()
        assert isinstance(memory, MemoryStore)
        assert resilience_state.store_backend(memory) == "memory"
        assert not resilience_state.store_is_shared()
    finally:
        resilience_state.get_store.cache_clear()
