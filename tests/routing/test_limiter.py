"""The request queue of one connection: concurrency, spacing and the per-minute window, in
order, on a fake clock; a cancelled waiter leaves. The limits hold between two processes that
share a state store (two limiters on one memory store, or on two Redis stores under one key
prefix), and a dead process's slot comes back after its TTL.

The limiter takes its starts from a state store: each test gives it a memory store on the fake
clock (before, it kept its own counts on its own clock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from omniroute.core.store import MemoryStore, RedisStore, StateStore
from omniroute.core.store.resilient import ResilientStore
from routing.domain.attempts.admission import check_queue_admission
from routing.proxy.admission.limiter import (
    HOLD_TTL_SECONDS,
    Limiter,
    LimiterHold,
    LimiterPolicy,
)
from tests.conftest import free_port
from tests.core.store.support import REDIS_URL, redis_store_on_prefix
from tests.resilience.conftest import FakeClock

WAIT = 5.0


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_concurrency_is_capped_and_waiters_start_in_order() -> None:
    limiter = Limiter(LimiterPolicy(max_concurrent=1), MemoryStore(clock=FakeClock()))
    first = await limiter.schedule()
    started: list[int] = []

    async def request(n: int) -> LimiterHold:
        hold = await limiter.schedule()
        started.append(n)
        return hold

    tasks = [asyncio.ensure_future(request(n)) for n in range(3)]
    await settle()
    assert (started, limiter.queued, limiter.running) == ([], 3, 1)
    await first.release()
    await settle()
    assert started == [0]
    for expected in ([0, 1], [0, 1, 2]):
        await (await asyncio.wait_for(tasks[len(expected) - 2], WAIT)).release()
        await settle()
        assert started == expected
    await (await tasks[2]).release()
    assert limiter.idle


async def test_min_time_spaces_the_starts() -> None:
    clock = FakeClock()
    limiter = Limiter(LimiterPolicy(min_time_seconds=10.0), MemoryStore(clock=clock))
    await limiter.schedule()
    second = asyncio.ensure_future(limiter.schedule())
    await settle()
    assert not second.done()

    clock.advance(9.9)
    limiter.poke()
    await settle()
    assert not second.done()
    clock.advance(0.1)
    limiter.poke()
    await asyncio.wait_for(second, WAIT)


async def test_the_reservoir_refills_every_minute() -> None:
    clock = FakeClock()
    limiter = Limiter(LimiterPolicy(per_minute=2), MemoryStore(clock=clock))
    await limiter.schedule()
    await limiter.schedule()
    third = asyncio.ensure_future(limiter.schedule())
    await settle()
    assert not third.done()

    clock.advance(60)
    limiter.poke()
    await asyncio.wait_for(third, WAIT)


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    limiter = Limiter(LimiterPolicy(max_concurrent=1), MemoryStore(clock=FakeClock()))
    held = await limiter.schedule()
    leaving = asyncio.ensure_future(limiter.schedule())
    staying = asyncio.ensure_future(limiter.schedule())
    await settle()

    leaving.cancel()
    await settle()
    assert limiter.queued == 1
    await held.release()
    await asyncio.wait_for(staying, WAIT)
    assert limiter.running == 1


@pytest.mark.parametrize(
    ("queued", "depth", "admitted"),
    [(0, 0, True), (500, 0, True), (1, 2, True), (2, 2, False), (3, 2, False)],
)
def test_queue_admission(queued: int, depth: int, admitted: bool) -> None:
    refusal = check_queue_admission(queued, depth, "acme/m1")

    assert (refusal is None) is admitted
    if refusal is not None:
        assert "acme/m1" in refusal and "maxQueueDepth" in refusal and "not an upstream" in refusal


async def test_the_window_slides_a_minute_behind_each_start() -> None:
    # A reservoir refilled every 60 s would let two more start at 60 s, four within one second.
    clock = FakeClock()
    limiter = Limiter(LimiterPolicy(per_minute=2), MemoryStore(clock=clock))
    clock.advance(59)
    await limiter.schedule()
    await limiter.schedule()
    clock.advance(1)
    third = asyncio.ensure_future(limiter.schedule())
    await settle()
    assert not third.done()

    clock.advance(58.9)
    limiter.poke()
    await settle()
    assert not third.done()
    clock.advance(0.1)
    limiter.poke()
    await asyncio.wait_for(third, WAIT)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def two_processes(request: pytest.FixtureRequest) -> AsyncIterator[tuple[StateStore, ...]]:
    """The stores of two processes sharing state: one memory store, or two Redis stores
    (separate connections) under one key prefix; both on one fake clock."""
    clock = FakeClock()
    if request.param == "memory":
        store = MemoryStore(clock=clock)
        yield store, store
        return
    async with redis_store_on_prefix(clock) as here:
        there = RedisStore(REDIS_URL, prefix=here.prefix, clock=clock)
        try:
            yield here, there
        finally:
            await there.close()


def pair(stores: tuple[StateStore, ...], policy: LimiterPolicy) -> tuple[Limiter, Limiter]:
    here, there = stores
    return Limiter(policy, here, key="acme:1"), Limiter(policy, there, key="acme:1")


async def until_done(task: asyncio.Future[LimiterHold]) -> LimiterHold:
    return await asyncio.wait_for(task, WAIT)


async def test_two_processes_share_the_window(two_processes: tuple[StateStore, ...]) -> None:
    here, there = pair(two_processes, LimiterPolicy(per_minute=3))
    clock = two_processes[0].clock
    assert isinstance(clock, FakeClock)
    await here.schedule()
    await there.schedule()
    await here.schedule()
    waiting = [asyncio.ensure_future(lim.schedule()) for lim in (here, there)]
    await settle()
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in waiting)  # three started in the minute, of both

    clock.advance(60)
    here.poke()
    there.poke()
    for task in waiting:
        await until_done(task)


async def test_two_processes_share_the_spacing(two_processes: tuple[StateStore, ...]) -> None:
    here, there = pair(two_processes, LimiterPolicy(min_time_seconds=10.0))
    clock = two_processes[0].clock
    assert isinstance(clock, FakeClock)
    await here.schedule()
    waiting = asyncio.ensure_future(there.schedule())
    await settle()
    await asyncio.sleep(0.05)
    assert not waiting.done()

    clock.advance(10)
    there.poke()
    await until_done(waiting)


async def test_two_processes_share_the_concurrency(two_processes: tuple[StateStore, ...]) -> None:
    here, there = pair(two_processes, LimiterPolicy(max_concurrent=1))
    running = await here.schedule()
    waiting = asyncio.ensure_future(there.schedule())
    await settle()
    await asyncio.sleep(0.25)  # more than two of its polls
    assert not waiting.done() and there.running == 0

    await running.release()
    await (await until_done(waiting)).release()  # its next poll finds the slot free
    assert here.idle and there.idle


async def test_a_dead_process_slot_comes_back_after_its_ttl() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    dead = Limiter(LimiterPolicy(max_concurrent=1), store, key="acme:1")
    await dead.schedule()  # never released, never refreshed: its process is gone
    alive = Limiter(LimiterPolicy(max_concurrent=1), store, key="acme:1")
    waiting = asyncio.ensure_future(alive.schedule())
    clock.advance(HOLD_TTL_SECONDS - 1)
    await asyncio.sleep(0.25)
    assert not waiting.done()

    clock.advance(1)
    await until_done(waiting)


async def test_a_running_request_keeps_its_slot_by_refreshing_it() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    here = Limiter(LimiterPolicy(max_concurrent=1), store, key="acme:1")
    there = Limiter(LimiterPolicy(max_concurrent=1), store, key="acme:1")
    running = await here.schedule()
    waiting = asyncio.ensure_future(there.schedule())
    clock.advance(HOLD_TTL_SECONDS - 1)
    await here.refresh_slots()
    clock.advance(2)
    await asyncio.sleep(0.25)
    assert not waiting.done()

    await running.release()
    await until_done(waiting)


async def test_while_the_store_is_away_each_process_keeps_its_own_limits() -> None:
    # The store never fails a request; caps are per process while degraded
    # (docs/resilience.md, the state store).
    clock = FakeClock()
    away = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    stores = [
        ResilientStore(RedisStore(away, prefix="t:", clock=clock), timeout=0.5) for _ in range(2)
    ]
    here, there = pair((stores[0], stores[1]), LimiterPolicy(per_minute=2, max_concurrent=3))
    try:
        for limiter in (here, there):
            await asyncio.wait_for(limiter.schedule(), WAIT)
            await asyncio.wait_for(limiter.schedule(), WAIT)
            third = asyncio.ensure_future(limiter.schedule())
            await asyncio.sleep(0.25)
            assert not third.done()  # its own window is full (not its concurrency: 2 of 3)
            third.cancel()
        assert all(store.degraded for store in stores)
    finally:
        for store in stores:
            await store.close()
