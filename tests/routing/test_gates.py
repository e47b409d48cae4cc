"""The account semaphores on both state-store backends: caps that hold
(also between two processes sharing a store), FIFO, a bounded queue, a timeout, a waiter that
leaves, idempotent release, blocked gates and stats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from omniroute.core.store import MemoryStore, StateStore
from routing.proxy.admission.gates import QUEUE_FULL, TIMED_OUT, GateRefused, Gates, Hold
from tests.core.store.support import CLOCK_START, redis_store_on_prefix
from tests.resilience.conftest import FakeClock

WAIT = 5.0  # a bound no test reaches unless it is broken


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    clock = FakeClock(start=CLOCK_START)
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    async with redis_store_on_prefix(clock) as redis_store:
        yield redis_store


async def take(gates: Gates, holder: str, *items: tuple[str, int | None]) -> Hold:
    return await gates.acquire(list(items), holder=holder, wait_seconds=WAIT, max_queue=20)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_cap_holds_and_waiters_are_admitted_in_order(store: StateStore) -> None:
    gates = Gates(store)
    order: list[int] = []

    async def request(n: int) -> None:
        hold = await take(gates, f"r{n}", ("conn:1", 2))
        order.append(n)
        await asyncio.sleep(0)
        await hold.release()

    first = [await take(gates, "a", ("conn:1", 2)), await take(gates, "b", ("conn:1", 2))]
    tasks = [asyncio.ensure_future(request(n)) for n in range(4)]
    await settle()
    assert order == [] and gates.stats()["conn:1"].queued == 4
    for hold in first:
        await hold.release()
    await asyncio.wait_for(asyncio.gather(*tasks), WAIT)

    assert order == [0, 1, 2, 3]
    assert "conn:1" not in gates.stats()  # idle: forgotten


async def test_several_gates_are_taken_together(store: StateStore) -> None:
    gates = Gates(store)
    held = await take(gates, "a", ("conn:1", 5), ("conn:1:model:m", 1))
    other_model = await take(gates, "b", ("conn:1", 5), ("conn:1:model:n", 1))
    waiting = asyncio.ensure_future(take(gates, "c", ("conn:1", 5), ("conn:1:model:m", 1)))
    await settle()

    assert not waiting.done()
    assert gates.stats()["conn:1"].running == 2  # the waiter holds nothing
    await held.release()
    third = await asyncio.wait_for(waiting, WAIT)
    await third.release()
    await other_model.release()


async def test_no_cap_means_no_gate(store: StateStore) -> None:
    gates = Gates(store)

    hold = await take(gates, "a", ("conn:1", None), ("global", 0))

    await hold.release()
    assert gates.stats() == {}


async def test_a_full_queue_refuses_at_once(store: StateStore) -> None:
    gates = Gates(store)
    held = await take(gates, "a", ("conn:1", 1))
    queued = asyncio.ensure_future(
        gates.acquire([("conn:1", 1)], holder="b", wait_seconds=WAIT, max_queue=1)
    )
    await settle()

    with pytest.raises(GateRefused) as refused:
        await gates.acquire([("conn:1", 1)], holder="c", wait_seconds=WAIT, max_queue=1)

    assert refused.value.code == QUEUE_FULL
    await held.release()
    await (await asyncio.wait_for(queued, WAIT)).release()


async def test_a_wait_past_its_limit_gives_up_and_leaves_the_queue(store: StateStore) -> None:
    gates = Gates(store)
    held = await take(gates, "a", ("conn:1", 1))

    with pytest.raises(GateRefused) as refused:
        await gates.acquire([("conn:1", 1)], holder="b", wait_seconds=0.01, max_queue=20)

    assert refused.value.code == TIMED_OUT
    assert gates.stats()["conn:1"].queued == 0
    await held.release()


async def test_a_cancelled_waiter_leaves_and_the_next_one_is_served(store: StateStore) -> None:
    gates = Gates(store)
    held = await take(gates, "a", ("conn:1", 1))
    leaving = asyncio.ensure_future(take(gates, "b", ("conn:1", 1)))
    staying = asyncio.ensure_future(take(gates, "c", ("conn:1", 1)))
    await settle()

    leaving.cancel()
    await settle()
    await held.release()
    hold = await asyncio.wait_for(staying, WAIT)

    assert leaving.cancelled()
    assert gates.stats()["conn:1"].running == 1 and gates.stats()["conn:1"].queued == 0
    await hold.release()


async def test_release_is_idempotent(store: StateStore) -> None:
    gates = Gates(store)
    hold = await take(gates, "a", ("conn:1", 2))
    other = await take(gates, "b", ("conn:1", 2))

    await hold.release()
    await hold.release()

    assert gates.stats()["conn:1"].running == 1
    await other.release()


async def test_a_blocked_gate_admits_nobody_until_unblocked(store: StateStore) -> None:
    gates = Gates(store)
    gates.block("conn:1", until=float("inf"))
    waiting = asyncio.ensure_future(take(gates, "a", ("conn:1", 1)))
    await settle()

    assert not waiting.done() and gates.stats()["conn:1"].blocked_until is not None
    gates.unblock("conn:1")
    await (await asyncio.wait_for(waiting, WAIT)).release()


async def test_two_processes_sharing_a_store_share_the_cap(store: StateStore) -> None:
    here, there = Gates(store), Gates(store)  # each process has its own queues
    held = await take(here, "a", ("conn:1", 1))
    waiting = asyncio.ensure_future(take(there, "b", ("conn:1", 1)))
    await settle()  # its first try met the other process's slot in the store

    assert not waiting.done()  # the store's count is the cap, across processes
    assert there.stats()["conn:1"].running == 0
    await held.release()
    hold = await asyncio.wait_for(waiting, WAIT)  # seen at its next poll
    await hold.release()
