"""The guards' records are read ahead: before the eligibility filters look at a target, the
attempt loop reads the records the filters name (connection state, model lockouts, provider
breaker) with one ``get_many``, a single round trip on Redis instead of one per filter
(docs/architecture.md, "One request")."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from omniroute.core.store import NOT_READ, MemoryStore
from resilience.domain.attribution import TimerClass
from routing.domain.config.vocabulary import ExclusionReason
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext, Exclusion
from routing.proxy.upstream.client import Upstream
from tests.routing.harness import OK, PRIMARY, Gateway

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTS = 5


def counted(store: MemoryStore) -> collections.Counter[str]:
    """Count ``store``'s record reads (``get``, and ``get_many`` by keys read) from now on."""
    calls: collections.Counter[str] = collections.Counter()
    get, get_many = store.get, store.get_many

    async def counting_get(key: str) -> Any:
        calls["get"] += 1
        return await get(key)

    async def counting_get_many(keys: Any) -> Any:
        calls["get_many"] += 1
        calls["keys read ahead"] += len(keys)
        return await get_many(keys)

    store.get = counting_get  # type: ignore[method-assign]
    store.get_many = counting_get_many  # type: ignore[method-assign]
    return calls


async def test_a_request_reads_its_guards_records_in_one_round_trip(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call()).status == 200  # warm
    calls = counted(gateway.store)  # type: ignore[arg-type]
    for _ in range(REQUESTS):
        assert (await gateway.call()).status == 200
    # Before: three reads a request (connection state, lockouts, breaker), one round trip each.
    assert calls == {"get_many": REQUESTS, "keys read ahead": 3 * REQUESTS}


class Named:
    """A filter reading one named record; it excludes when ``excludes``, after reading."""

    def __init__(self, key: str, *, excludes: bool = False, pops: bool = True) -> None:
        self.key, self.excludes, self.pops = key, excludes, pops
        self.seen: list[Any] = []

    def reads(self, target: Any) -> tuple[str, ...]:
        return (self.key,)

    async def exclude(self, target: Any, context: AttemptContext) -> Exclusion | None:
        if self.pops:
            self.seen.append(context.loop.read_ahead.pop(self.key, NOT_READ))
        if not self.excludes:
            return None
        return Exclusion(target, ExclusionReason.UNAVAILABLE, None, TimerClass.OPERATOR)


class Context:
    """The part of ``AttemptContext`` the eligibility check touches."""

    def __init__(self) -> None:
        self.loop = type("Loop", (), {})()
        self.loop.read_ahead = {}
        self.loop.exclusions = []


async def test_what_is_read_ahead_serves_one_check_only() -> None:
    store = MemoryStore()
    await store.set("first", 1)
    await store.set("second", 2)
    first, second = Named("first", excludes=True), Named("second")
    loop = AttemptLoop(Upstream(), filters=(first, second), store=store)
    context: Any = Context()

    assert await loop.excluded(object(), context)  # type: ignore[arg-type]
    assert first.seen == [1] and second.seen == []  # the second filter never ran
    assert context.loop.read_ahead == {}  # its record is not kept for a later check

    await store.set("first", 10)
    first.excludes = False
    assert not await loop.excluded(object(), context)  # type: ignore[arg-type]
    assert first.seen == [1, 10] and second.seen == [2]  # read again, as it is now
    assert context.loop.read_ahead == {}


async def test_without_a_store_each_filter_reads_its_own() -> None:
    named = Named("key")
    loop = AttemptLoop(Upstream(), filters=(named,))
    context: Any = Context()
    assert not await loop.excluded(object(), context)  # type: ignore[arg-type]
    assert named.seen == [NOT_READ]
