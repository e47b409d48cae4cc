"""Contract tests of the state store, run against every backend with a fake clock: counters
(``incr``, ttl kept from creation) and JSON records (get/set/delete, ttl, ``update``, ``scan``).

The ``redis`` cases need a server at ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); they
are skipped when it is unreachable, unless ``CI=true`` in which case they fail.
"""

from __future__ import annotations

import pytest

from omniroute.core.store import Json, StateStore
from tests.resilience.conftest import FakeClock

# -- counters ------------------------------------------------------------------------------


async def test_incr_counts_from_zero(store: StateStore) -> None:
    assert await store.get_counter("hits") == 0
    assert await store.incr("hits") == 1
    assert await store.incr("hits", 5) == 6
    assert await store.incr("hits", -2) == 4
    assert await store.get_counter("hits") == 4
    assert await store.get("hits") == 4


async def test_incr_ttl_is_set_on_creation_and_kept(store: StateStore, clock: FakeClock) -> None:
    assert await store.incr("errors", ttl=10) == 1
    clock.advance(6)
    assert await store.incr("errors", ttl=10) == 2  # does not push the expiry back
    clock.advance(3.9)
    assert await store.get_counter("errors") == 2
    clock.advance(0.1)  # t0 + 10: expired
    assert await store.get_counter("errors") == 0
    assert await store.incr("errors", ttl=10) == 1  # a fresh counter with a fresh ttl
    clock.advance(9.5)
    assert await store.get_counter("errors") == 1


async def test_incr_without_ttl_never_expires(store: StateStore, clock: FakeClock) -> None:
    await store.incr("total", 3)
    clock.advance(10**7)
    assert await store.get_counter("total") == 3


async def test_incr_on_non_integer_record_raises(store: StateStore) -> None:
    values: list[Json] = [{"a": 1}, "7", 1.5, True]
    for value in values:
        await store.set("odd", value)
        with pytest.raises(TypeError):
            await store.incr("odd")
        with pytest.raises(TypeError):
            await store.get_counter("odd")
    assert await store.get("odd") is True


# -- records -------------------------------------------------------------------------------


async def test_get_set_delete(store: StateStore) -> None:
    assert await store.get("breaker") is None
    await store.set("breaker", {"state": "open", "failures": 3})
    assert await store.get("breaker") == {"state": "open", "failures": 3}
    await store.set("breaker", "closed")
    assert await store.get("breaker") == "closed"
    assert await store.delete("breaker") is True
    assert await store.delete("breaker") is False
    assert await store.get("breaker") is None


async def test_get_many_reads_each_record_in_order(store: StateStore, clock: FakeClock) -> None:
    await store.set("breaker", {"state": "open"})
    await store.set("cooldown", {"until": 5}, ttl=30)
    await store.incr("hits", 2)
    keys = ["cooldown", "absent", "breaker", "hits", "breaker"]
    assert await store.get_many(keys) == [
        {"until": 5},
        None,
        {"state": "open"},
        2,
        {"state": "open"},
    ]
    clock.advance(30)  # the cooldown expired: absent, as get says
    assert await store.get_many(["cooldown", "breaker"]) == [None, {"state": "open"}]
    assert await store.get_many([]) == []


async def test_set_with_ttl_expires(store: StateStore, clock: FakeClock) -> None:
    await store.set("cooldown", {"until": 5}, ttl=30)
    clock.advance(29.99)
    assert await store.get("cooldown") == {"until": 5}
    clock.advance(0.01)
    assert await store.get("cooldown") is None
    assert await store.delete("cooldown") is False  # nothing live was removed


async def test_set_replaces_the_expiry(store: StateStore, clock: FakeClock) -> None:
    await store.set("k", 1, ttl=5)
    await store.set("k", 2)  # no ttl: never expires
    clock.advance(100)
    assert await store.get("k") == 2
    await store.set("k", 3, ttl=1)
    clock.advance(1)
    assert await store.get("k") is None


async def test_set_none_deletes(store: StateStore) -> None:
    await store.set("k", [1])
    await store.set("k", None)
    assert await store.get("k") is None
    assert await store.scan("") == {}


async def test_values_round_trip_through_json(store: StateStore) -> None:
    value: Json = {"list": [1, 2.5, "x", None, True], "nested": {"a": {}}}
    await store.set("v", value)
    fetched = await store.get("v")
    assert fetched == value
    assert isinstance(fetched, dict)
    fetched["list"] = []  # callers get copies, never the stored object
    assert await store.get("v") == value
    await store.set("t", ("a", 1))  # type: ignore[arg-type]
    assert await store.get("t") == ["a", 1]


async def test_set_rejects_non_json(store: StateStore) -> None:
    with pytest.raises(TypeError):
        await store.set("bad", {"when": object()})  # type: ignore[dict-item]
    assert await store.get("bad") is None


async def test_update_creates_modifies_and_deletes(store: StateStore) -> None:
    seen: list[Json | None] = []

    def bump(current: Json | None) -> Json | None:
        seen.append(current)
        if current is None:
            return {"n": 1}
        assert isinstance(current, dict) and isinstance(current["n"], int)
        return None if current["n"] >= 2 else {"n": current["n"] + 1}

    assert await store.update("rec", bump) == {"n": 1}
    assert await store.update("rec", bump) == {"n": 2}
    assert await store.get("rec") == {"n": 2}
    assert await store.update("rec", bump) is None
    assert await store.get("rec") is None
    assert seen == [None, {"n": 1}, {"n": 2}]


async def test_update_ttl(store: StateStore, clock: FakeClock) -> None:
    await store.update("rec", lambda _: "a", ttl=10)
    clock.advance(9)
    assert await store.get("rec") == "a"
    assert await store.update("rec", lambda cur: f"{cur}b", ttl=10) == "ab"  # new ttl from now
    clock.advance(9)
    assert await store.get("rec") == "ab"
    clock.advance(1)
    assert await store.update("rec", lambda cur: repr(cur)) == "None"  # expired: sees None
    clock.advance(10**6)
    assert await store.get("rec") == "None"  # ttl None: no expiry


async def test_update_error_leaves_record_untouched(store: StateStore) -> None:
    await store.set("rec", {"n": 1}, ttl=60)

    def boom(current: Json | None) -> Json | None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await store.update("rec", boom)
    assert await store.get("rec") == {"n": 1}


async def test_update_returns_json_round_tripped_value(store: StateStore) -> None:
    assert await store.update("t", lambda _: ("a", 1)) == ["a", 1]  # type: ignore[arg-type,return-value]


async def test_scan_by_prefix_ignores_expired(store: StateStore, clock: FakeClock) -> None:
    await store.set("breaker:a", {"state": "open"})
    await store.set("breaker:b", {"state": "closed"}, ttl=5)
    await store.set("breaker:c", "gone soon", ttl=1)
    await store.incr("breaker:count")
    await store.set("cooldown:a", 1)
    await store.set("odd*[key]?", 2)
    await store.window_add("breaker:window", window=60)
    await store.semaphore_acquire("breaker:slots", "h", limit=1, ttl=60)
    clock.advance(1)
    assert await store.scan("breaker:") == {
        "breaker:a": {"state": "open"},
        "breaker:b": {"state": "closed"},
        "breaker:count": 1,
    }
    assert await store.scan("odd*") == {"odd*[key]?": 2}  # glob characters are literal
    assert await store.scan("odd?") == {}
    assert len(await store.scan("")) == 5
    clock.advance(4)
    assert set(await store.scan("breaker:")) == {"breaker:a", "breaker:count"}


async def test_scan_many_keys(store: StateStore) -> None:
    for i in range(1200):
        await store.set(f"bulk:{i}", i)
    found = await store.scan("bulk:")
    assert found == {f"bulk:{i}": i for i in range(1200)}
    assert await store.clear_prefix("bulk:") == 1200
