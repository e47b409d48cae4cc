"""The local request queue of one connection (reference-part2 §5): concurrency, spacing and
the per-minute reservoir, in order, on a fake clock; a cancelled waiter leaves."""

from __future__ import annotations

import asyncio

import pytest

from routing.admission.limiter import Limiter, LimiterHold, LimiterPolicy
from routing.domain.admission import check_queue_admission
from tests.routing.harness import FakeClock

WAIT = 5.0


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_concurrency_is_capped_and_waiters_start_in_order() -> None:
    limiter = Limiter(LimiterPolicy(max_concurrent=1), FakeClock())
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
    limiter = Limiter(LimiterPolicy(min_time_seconds=10.0), clock)
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
    limiter = Limiter(LimiterPolicy(per_minute=2), clock)
    await limiter.schedule()
    await limiter.schedule()
    third = asyncio.ensure_future(limiter.schedule())
    await settle()
    assert not third.done()

    clock.advance(60)
    limiter.poke()
    await asyncio.wait_for(third, WAIT)


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    limiter = Limiter(LimiterPolicy(max_concurrent=1), FakeClock())
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
