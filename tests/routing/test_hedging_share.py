"""The learned first-token times are shared through the state store:
each process merges its samples in the background, at most every 5 s, and takes the merged
ones back."""

from __future__ import annotations

import pytest

from omniroute.core.store.memory import MemoryStore
from routing.domain.attempts.hedging import MIN_SAMPLES
from routing.proxy.hedging import SHARE_SECONDS, Hedging, stop_sharing
from tests.routing.harness import FakeClock

PAIR = ("acme", "m1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_two_processes_learn_together(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    one, two = Hedging(store), Hedging(store)
    for _ in range(MIN_SAMPLES // 2):
        one.times.add(PAIR, 100.0, clock())
        two.times.add(PAIR, 200.0, clock())

    await one.share()
    await two.share()
    await one.share()

    assert len(one.times.times(PAIR, clock())) == MIN_SAMPLES
    assert sorted(two.times.times(PAIR, clock())) == [100.0] * 10 + [200.0] * 10


async def test_sharing_runs_in_the_background_at_most_every_five_seconds(
    clock: FakeClock,
) -> None:
    store = MemoryStore(clock=clock)
    hedging = Hedging(store)
    hedging.times.add(PAIR, 100.0, clock())

    hedging._share_soon(clock())
    await stop_sharing(hedging)
    assert len(await store.scan("first-token:")) == 1
    hedging.times.add(PAIR, 150.0, clock())
    clock.advance(SHARE_SECONDS - 1)
    hedging._share_soon(clock())  # too soon: nothing starts
    await stop_sharing(hedging)
    assert await store.get("first-token:acme:m1") == [[clock() - 4, 100.0]]

    clock.advance(1)
    hedging._share_soon(clock())
    await stop_sharing(hedging)
    shared = await store.get("first-token:acme:m1")
    assert isinstance(shared, list) and len(shared) == 2


async def test_a_store_that_fails_leaves_the_process_on_its_own_samples(
    clock: FakeClock,
) -> None:
    class Broken(MemoryStore):
        async def update(self, *args: object, **kwargs: object) -> None:
            raise ConnectionError("down")

    hedging = Hedging(Broken(clock=clock))
    hedging.times.add(PAIR, 100.0, clock())

    await hedging.share()

    assert hedging.times.times(PAIR, clock()) == [100.0]
