"""Session affinity through the chat consumer, on the fake clock: one
session stays on one connection among three, moves when that connection fails or cools down
and stays on the new one, sessions spread least-recently-used, and the pins survive a restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from channels.db import database_sync_to_async
from django.db.backends.utils import CursorWrapper

from omniroute.core import tasks
from omniroute.core.store import MemoryStore, StateStore
from resilience.services.housekeeping import housekeeping_settle, resilience_ready
from routing.models import Provider, SessionAffinityPin
from tests.routing.affinity_support import (
    ask,
    key_id,
    pinned_to,
    served,
    set_ttl,
    three_connections,
)
from tests.routing.combo_support import KEYS
from tests.routing.harness import (
    OK,
    UNAVAILABLE,
    Behaviour,
    Gateway,
    error,
    in_turn,
)

pytestmark = pytest.mark.django_db(transaction=True)

HINTED_429 = error(429, "slow down", "rate_limit_exceeded", {"retry-after": "60"})


@pytest.fixture
def abc(gateway: Gateway, acme: Provider) -> list[int]:
    """``acme``'s connections a, b, c, all answering, with session affinity on (10 minutes)."""
    set_ttl()
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))
    return three_connections(acme)


async def test_one_session_lands_on_one_connection_among_three(
    gateway: Gateway, abc: list[int]
) -> None:
    a, b, _ = abc
    assert await served(gateway, "other") == [a]  # another session took the first connection

    assert await served(gateway, "s1", 3) == [b, b, b]

    assert await pinned_to(gateway.store, await key_id(), "s1") == b
    assert gateway.fake.calls[1:] == [KEYS[1]] * 3  # b was asked first every time


@pytest.mark.parametrize(
    "failure", [UNAVAILABLE, HINTED_429], ids=["503", "429 with a long Retry-After"]
)
async def test_a_session_moves_when_its_connection_fails_and_stays_on_the_new_one(
    gateway: Gateway, abc: list[int], failure: Behaviour
) -> None:
    a, b, _ = abc
    assert await served(gateway, "s1", 2) == [a, a]
    gateway.fake.behaviours[KEYS[0]] = failure

    assert await served(gateway, "s1") == [b]  # a failed (retries spent), b answered: moved
    gateway.fake.behaviours[KEYS[0]] = OK
    assert await served(gateway, "s1", 2) == [b, b]
    gateway.clock.advance(120)  # whatever a's failure left has run out
    assert await served(gateway, "s1") == [b]

    asked = gateway.fake.calls[2:]
    assert set(asked[: asked.index(KEYS[1])]) == {KEYS[0]}  # a, then b answered ...
    assert asked[asked.index(KEYS[1]) :] == [KEYS[1]] * 4  # ... and only b since
    assert await pinned_to(gateway.store, await key_id(), "s1") == b


async def test_a_short_hint_sends_the_request_elsewhere_but_keeps_the_pin(
    gateway: Gateway, abc: list[int]
) -> None:
    a, b, _ = abc
    assert await served(gateway, "s1") == [a]
    briefly = error(429, "slow down", "rate_limit_exceeded", {"retry-after": "2"})
    gateway.fake.behaviours[KEYS[0]] = in_turn(briefly, OK)

    assert await served(gateway, "s1") == [b]  # an equivalent account answered at once

    assert await pinned_to(gateway.store, await key_id(), "s1") == a
    assert await served(gateway, "s1") == [a]


async def test_a_pinned_connection_cooling_down_is_skipped_and_the_session_moves(
    gateway: Gateway, abc: list[int]
) -> None:
    a, b, _ = abc
    assert await served(gateway, "s1") == [a]
    gateway.fake.behaviours[KEYS[0]] = in_turn(HINTED_429, OK)
    nameless = await ask(gateway, None, content="")  # no session: the plain order, a first
    assert nameless.connection == b  # a answered 429 for 60 s: its pair cools that long

    assert await served(gateway, "s1", 2) == [b, b]  # a is skipped without being asked

    assert gateway.fake.calls.count(KEYS[0]) == 2  # s1's first answer and the 429
    assert await pinned_to(gateway.store, await key_id(), "s1") == b


async def test_a_pin_is_dropped_when_nothing_answered(gateway: Gateway, abc: list[int]) -> None:
    a, _, _ = abc
    assert await served(gateway, "s1") == [a]
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, UNAVAILABLE))

    assert (await ask(gateway, "s1")).status == 503

    assert await pinned_to(gateway.store, await key_id(), "s1") is None


async def test_a_request_the_upstream_refuses_as_invalid_keeps_the_pin(
    gateway: Gateway, abc: list[int]
) -> None:
    a, _, _ = abc
    assert await served(gateway, "s1") == [a]
    gateway.fake.behaviours[KEYS[0]] = in_turn(error(400, "bad temperature", "invalid_value"), OK)

    assert (await ask(gateway, "s1")).status == 400  # the client's mistake, not a's

    assert await pinned_to(gateway.store, await key_id(), "s1") == a
    assert await served(gateway, "s1") == [a]


async def test_sessions_spread_over_the_connections_least_recently_used_first(
    gateway: Gateway, abc: list[int]
) -> None:
    a, b, c = abc
    picks = []
    for session in ("s1", "s2", "s3", "s1", "s4", "s5"):
        picks += await served(gateway, session)
        gateway.clock.advance(1)

    assert picks == [a, b, c, a, b, c]  # s4: b was used longest ago; s5: then c


async def test_a_session_header_or_a_body_field_names_the_session(
    gateway: Gateway, abc: list[int]
) -> None:
    a, b, c = abc
    assert await served(gateway, "x") == [a]

    codex = await ask(gateway, "s1", header=b"x-codex-session-id", content="one")
    omniroute = await ask(gateway, "s1", header=b"x-omniroute-session", content="two")

    assert (codex.connection, omniroute.connection) == (b, b)  # one session, three headers
    assert (await ask(gateway, None, content="another text")).connection == c


async def test_a_zero_ttl_keeps_no_pin_and_makes_no_extra_store_call(
    gateway: Gateway, acme: Provider
) -> None:
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))
    await database_sync_to_async(three_connections)(acme)  # TTL 0: the default
    calls: list[str] = []
    _count_calls(gateway.store, calls)
    await served(gateway, None)  # warm-up: the snapshot, the restore, first records
    calls.clear()

    await ask(gateway, None, content="no session")
    without = list(calls)
    calls.clear()
    await ask(gateway, "s1", content="no session")

    assert calls == without
    assert not [key for key in calls if key.startswith("affinity")]
    assert not await gateway.store.scan("affinity")
    await tasks.flush()
    assert not await SessionAffinityPin.objects.aexists()


async def test_a_pin_survives_a_restart(gateway: Gateway, abc: list[int]) -> None:
    a, b, _ = abc
    assert await served(gateway, "s0") == [a]
    assert await served(gateway, "s1") == [b]
    await tasks.flush()  # the pins' rows are written in the background
    restarted = MemoryStore(clock=gateway.clock)  # a new process: same database, empty store
    gateway = Gateway(gateway.key, gateway.fake, gateway.clock, restarted)
    await resilience_ready(restarted)  # the start-up restore, whose pins come in the background
    await housekeeping_settle()

    assert await served(gateway, "s1", 2) == [b, b]  # restored at start-up, not chosen anew
    assert await served(gateway, "s2") == [a]  # a fresh store: a new session starts at a


async def test_a_pinned_session_reads_and_writes_no_database_on_its_way(
    gateway: Gateway, abc: list[int]
) -> None:
    a, _, _ = abc
    for _ in range(2):  # the snapshot, the restore, the new pin's row: before the guard
        assert await served(gateway, "s1") == [a]
        await tasks.flush()
        await housekeeping_settle()

    with queries_seen() as seen:  # in any thread: the slid pin's row is not due for a minute
        assert await served(gateway, "s1", 2) == [a, a]
        await tasks.flush()

    assert seen == []  # (a write-through that failed on the guard would only be logged)


@contextmanager
def queries_seen() -> Iterator[list[str]]:
    """Every SQL statement, in any thread, is refused and listed."""
    seen: list[str] = []

    def refuse(sql: str, *args: object, **kwargs: object) -> None:
        seen.append(sql)
        raise AssertionError("the hot path queried the database")

    with (
        patch.object(CursorWrapper, "execute", side_effect=refuse),
        patch.object(CursorWrapper, "executemany", side_effect=refuse),
    ):
        yield seen


def _count_calls(store: StateStore, calls: list[str]) -> None:
    """Record the key of every record call ``store`` serves."""
    for name in ("get", "set", "update", "delete", "incr", "scan", "get_counter"):
        setattr(store, name, _counting(getattr(store, name), calls))


def _counting(method: Callable[..., Awaitable[object]], calls: list[str]) -> Callable[..., Any]:
    async def counted(key: str, *args: object, **kwargs: object) -> object:
        calls.append(key)
        return await method(key, *args, **kwargs)

    return counted
