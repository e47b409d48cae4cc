"""Session-affinity pins and usage on both state-store backends:
the least-recently-used choice (atomic, also for sessions starting at once), pins that slide,
move and are evicted, their rows written in the background, restored and swept."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from omniroute.core import tasks
from omniroute.core.store import MemoryStore, StateStore
from routing.domain.affinity.pins import Pin, Usage, pin_hash, usage_from_json
from routing.models import Provider, SessionAffinityPin
from routing.services.affinity import (
    affinity_choose,
    affinity_pin_answered,
    affinity_pin_evict,
    affinity_pin_get,
    affinity_pins_restore,
    affinity_pins_sweep,
    pin_key,
    usage_key,
)
from tests.core.store.support import CLOCK_START, redis_store_on_prefix
from tests.resilience.conftest import FakeClock
from tests.routing.harness import add_connection

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 600.0
HASH = pin_hash("acme", "1:header:session-1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=CLOCK_START)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[StateStore]:
    if request.param == "memory":
        yield MemoryStore(clock=clock)
    else:
        async with redis_store_on_prefix(clock) as redis_store:
            yield redis_store
    await tasks.flush()


@pytest.fixture
def abc(acme: Provider) -> list[tuple[int, int]]:
    """Three connections of ``acme`` as candidates: (id, priority), by priority."""
    return [
        (add_connection(acme, name, f"sk-{name}", priority=p), p)
        for name, p in (("a", 10), ("b", 20), ("c", 30))
    ]


async def choose(
    store: StateStore, candidates: list[tuple[int, int]], pin: int | None = None
) -> int:
    return await affinity_choose(store=store, provider="acme", candidates=candidates, pinned=pin)


async def answered(store: StateStore, connection: int) -> Pin:
    return await affinity_pin_answered(
        store=store, provider="acme", key_hash=HASH, connection_id=connection, ttl_seconds=TTL
    )


async def pinned(store: StateStore) -> Pin | None:
    return await affinity_pin_get(store=store, provider="acme", key_hash=HASH, ttl_seconds=TTL)


async def stored_connection(store: StateStore) -> int | None:
    pin = Pin.from_dict(await store.get(pin_key("acme", HASH)))
    return pin.connection_id if pin is not None else None


async def row() -> SessionAffinityPin | None:
    await tasks.flush()
    return await SessionAffinityPin.objects.filter(provider_id="acme", key_hash=HASH).afirst()


def moment(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


# --- the least-recently-used choice ------------------------------------------------------------


async def test_new_sessions_go_round_the_least_recently_used(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    a, b, c = (cid for cid, _ in abc)
    picks = []
    for _ in range(4):
        picks.append(await choose(store, abc))
        clock.advance(1)

    assert picks == [a, b, c, a]
    usage = usage_from_json(await store.get(usage_key("acme")))
    assert usage[a] == Usage(CLOCK_START + 3, 1) and usage[c] == Usage(CLOCK_START + 2, 1)


async def test_a_pinned_choice_counts_one_more_use_in_a_row(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    b = abc[1][0]
    for _ in range(3):
        assert await choose(store, abc, pin=b) == b
        clock.advance(1)

    usage = usage_from_json(await store.get(usage_key("acme")))
    assert usage == {b: Usage(CLOCK_START + 2, 3)}


async def test_sessions_starting_at_once_are_spread(
    store: StateStore, abc: list[tuple[int, int]]
) -> None:
    picks = await asyncio.gather(*(choose(store, abc) for _ in range(3)))

    assert sorted(picks) == sorted(cid for cid, _ in abc)


# --- pins ---------------------------------------------------------------------------------------


async def test_an_answer_makes_a_pin_and_its_row(
    store: StateStore, abc: list[tuple[int, int]]
) -> None:
    a = abc[0][0]

    pin = await answered(store, a)

    assert pin == Pin(a, CLOCK_START, CLOCK_START, CLOCK_START + TTL, saved_at=CLOCK_START)
    assert await pinned(store) == pin
    saved = await row()
    assert saved is not None and saved.connection_id == a
    assert (saved.created_at, saved.expires_at) == (moment(CLOCK_START), moment(pin.expires_at))


async def test_a_pin_slides_and_its_row_follows_at_most_once_a_minute(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    a = abc[0][0]
    await answered(store, a)

    clock.advance(30)
    slid = await answered(store, a)
    saved = await row()
    assert slid.created_at == CLOCK_START and slid.expires_at == CLOCK_START + 30 + TTL
    assert saved is not None and saved.last_used_at == moment(CLOCK_START)  # not yet due

    clock.advance(30)
    await answered(store, a)
    saved = await row()
    assert saved is not None and saved.last_used_at == moment(CLOCK_START + 60)
    assert saved.expires_at == moment(CLOCK_START + 60 + TTL)


async def test_a_pin_lapses_after_its_ttl_without_requests(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    await answered(store, abc[0][0])
    clock.advance(TTL)

    assert await pinned(store) is None


async def test_an_answer_from_another_connection_moves_the_pin(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    a, b = abc[0][0], abc[1][0]
    await answered(store, a)
    clock.advance(5)

    moved = await answered(store, b)

    assert moved == Pin(b, CLOCK_START + 5, CLOCK_START + 5, CLOCK_START + 5 + TTL, CLOCK_START + 5)
    saved = await row()
    assert saved is not None and saved.connection_id == b


async def test_eviction_deletes_only_a_pin_still_on_that_connection(
    store: StateStore, abc: list[tuple[int, int]]
) -> None:
    a, b = abc[0][0], abc[1][0]
    await answered(store, b)

    kept = await affinity_pin_evict(
        store=store, provider="acme", key_hash=HASH, connection_id=a, ttl_seconds=TTL
    )
    assert not kept and await stored_connection(store) == b
    assert await row() is not None

    evicted = await affinity_pin_evict(
        store=store, provider="acme", key_hash=HASH, connection_id=b, ttl_seconds=TTL
    )
    assert evicted and await stored_connection(store) is None
    assert await row() is None


# --- restart: restore and sweep ----------------------------------------------------------------


async def test_pins_are_restored_into_an_empty_store(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    b = abc[1][0]
    await answered(store, b)
    await tasks.flush()
    await store.clear_prefix("")  # the store lost everything; the table did not
    clock.advance(10)

    assert await affinity_pins_restore(store) == 1

    pin = await pinned(store)
    assert pin is not None and (pin.connection_id, pin.created_at) == (b, CLOCK_START)
    assert pin.expires_at == CLOCK_START + TTL
    clock.advance(TTL - 10)  # the store forgets it when it lapses
    assert await store.get(pin_key("acme", HASH)) is None


async def test_restore_keeps_a_live_record_unless_told_to_overwrite(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    a, b = abc[0][0], abc[1][0]
    await answered(store, a)
    await tasks.flush()
    clock.advance(1)
    await store.set(pin_key("acme", HASH), Pin(b, clock(), clock(), clock() + TTL).to_dict())

    assert await affinity_pins_restore(store) == 0
    assert await stored_connection(store) == b
    assert await affinity_pins_restore(store, True) == 1  # the database wins after an outage
    assert await stored_connection(store) == a


async def test_lapsed_rows_are_neither_restored_nor_kept(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    await answered(store, abc[0][0])
    await tasks.flush()
    await store.clear_prefix("")
    clock.advance(TTL)

    assert await affinity_pins_restore(store) == 0
    assert await affinity_pins_sweep(store) == 1
    assert await row() is None


async def test_a_pinned_use_within_a_second_is_not_written_again(
    store: StateStore, clock: FakeClock, abc: list[tuple[int, int]]
) -> None:
    b = abc[1][0]
    for _ in range(5):  # one burst: counted once
        assert await choose(store, abc, pin=b) == b
    clock.advance(0.5)
    assert await choose(store, abc, pin=b) == b

    usage = usage_from_json(await store.get(usage_key("acme")))
    assert usage == {b: Usage(CLOCK_START, 1)}
