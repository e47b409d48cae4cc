"""Session-affinity pins and connection usage in the state store, and the pins' durable copy;
the one write path of ``SessionAffinityPin``.

Two kinds of store record:

* ``affinity-pin:<provider>:<pin hash>`` → the session's pin (``routing.domain.affinity.pins.Pin``),
  expiring with it;
* ``affinity-usage:<provider>`` → when each of the provider's connections was last chosen for
  a session and how many times in a row: what the least-recently-used choice reads.

Every change is one atomic store update, so two gateway processes sharing a Redis store never
lose a use, and two sessions starting at once are spread over two connections. A pin's row is
written in the background (never before the answer): when the pin is made or moves, and while
it only slides, at most every ``WRITE_INTERVAL_SECONDS`` (a quarter of the TTL when that is
shorter), so a restored pin may lapse up to that much early. The rows are restored into the
store whenever the breakers are (``resilience.services.housekeeping``), and lapsed rows are
swept with them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import replace

from asgiref.sync import async_to_sync

from omniroute.core.db import db_sync_to_async
from omniroute.core.state import get_store
from omniroute.core.store import Json, StateStore
from omniroute.core.tasks import write_in_background
from routing.domain.affinity.pins import (
    Pin,
    live_pin,
    lru_choice,
    pin_after_answer,
    usage_after_choice,
    usage_from_json,
    usage_to_json,
    write_due,
)
from routing.models import SessionAffinityPin

PIN_PREFIX = "affinity-pin:"
USAGE_PREFIX = "affinity-usage:"
USAGE_KEEP_SECONDS = 7 * 24 * 3600.0  # a connection unused for longer counts as never used
WRITE_INTERVAL_SECONDS = 60.0
TOUCH_INTERVAL_SECONDS = 1.0  # a pinned use counts at most once a second per connection


def pin_key(provider: str, key_hash: str) -> str:
    return f"{PIN_PREFIX}{provider}:{key_hash}"


def usage_key(provider: str) -> str:
    return f"{USAGE_PREFIX}{provider}"


async def affinity_pin_get(
    *, store: StateStore, provider: str, key_hash: str, ttl_seconds: float
) -> Pin | None:
    """The session's live pin at ``provider``, if it has one."""
    return live_pin(await store.get(pin_key(provider, key_hash)), store.clock(), ttl_seconds)


async def affinity_choose(
    *, store: StateStore, provider: str, candidates: Sequence[tuple[int, int]], pinned: int | None
) -> int:
    """The connection a session tries first at ``provider``: ``pinned`` (its live pin's, which
    the plan has), else the least recently used of ``candidates`` ((id, priority), in plan
    order); counted in the provider's usage as chosen now. A pinned use already counted
    within :data:`TOUCH_INTERVAL_SECONDS` is not written again: placed sessions would
    otherwise all queue on the provider's one usage record under load."""
    now = store.clock()
    if pinned is not None:
        seen = usage_from_json(await store.get(usage_key(provider))).get(pinned)
        last = seen.last_used_at if seen is not None else None
        if last is not None and now - last < TOUCH_INTERVAL_SECONDS:
            return pinned
    chosen: list[int] = []

    def choose(raw: Json | None) -> Json | None:
        usage = usage_from_json(raw)
        pick = pinned if pinned is not None else lru_choice(candidates, usage)
        chosen[:] = [pick]  # the updater may run more than once: the last run counts
        after = usage_after_choice(usage, pick, now, pinned=pinned is not None)
        return usage_to_json(after, now, USAGE_KEEP_SECONDS)

    await store.update(usage_key(provider), choose, ttl=USAGE_KEEP_SECONDS)
    return chosen[0]


def _write_interval(ttl_seconds: float) -> float:
    return min(WRITE_INTERVAL_SECONDS, ttl_seconds / 4)


async def affinity_pin_answered(
    *, store: StateStore, provider: str, key_hash: str, connection_id: int, ttl_seconds: float
) -> Pin:
    """``connection_id`` answered the session: its pin slides forward, or is made (or moved)
    to that connection; the row follows in the background when due."""
    now = store.clock()
    kept: list[tuple[Pin, bool]] = []

    def answered(raw: Json | None) -> Json | None:
        before = live_pin(raw, now, ttl_seconds)
        after = pin_after_answer(before, connection_id, now, ttl_seconds)
        due = write_due(before, after, now, _write_interval(ttl_seconds))
        if due:
            after = replace(after, saved_at=now)
        kept[:] = [(after, due)]
        return after.to_dict()

    await store.update(pin_key(provider, key_hash), answered, ttl=ttl_seconds)
    pin, due = kept[0]
    if due:
        write_in_background(_save_row, provider, key_hash, pin)
    return pin


async def affinity_pin_evict(
    *, store: StateStore, provider: str, key_hash: str, connection_id: int, ttl_seconds: float
) -> bool:
    """Delete the session's pin if it still points at ``connection_id`` (another request may
    have moved it meanwhile); its row goes too. True when it was deleted."""
    evicted: list[bool] = []

    def evict(raw: Json | None) -> Json | None:
        pin = Pin.from_dict(raw)
        evicted[:] = [pin is not None and pin.connection_id == connection_id]
        return None if evicted[0] else raw

    # A pin left in place keeps at least its own expiry: it never ends later than now + TTL.
    await store.update(pin_key(provider, key_hash), evict, ttl=ttl_seconds)
    if evicted[0]:
        write_in_background(_delete_row, provider, key_hash)
    return evicted[0]


async def affinity_pins_restore(store: StateStore, overwrite: bool = False) -> int:
    """Load the live pins of the table into ``store`` where it has none (or over what it has,
    with ``overwrite``: after a store outage the database wins). Returns how many."""
    now = store.clock()
    rows = await db_sync_to_async(_live_rows)(now)
    restored = 0
    for provider, key_hash, pin in rows:
        key = pin_key(provider, key_hash)
        if not overwrite and await store.get(key) is not None:
            continue
        await store.set(key, replace(pin, saved_at=now).to_dict(), ttl=pin.expires_at - now)
        restored += 1
    return restored


async def affinity_pins_sweep(store: StateStore) -> int:
    """Delete the rows of lapsed pins (the store forgets them on its own). Returns how many."""
    deleted: int = await db_sync_to_async(_delete_lapsed)(store.clock())
    return deleted


def affinity_pins_clear(*, pins: Iterable[tuple[str, str]]) -> int:
    """Clear pins ((provider, key hash)) from the store and the table: those sessions choose a
    connection afresh at their next request. Returns how many rows went."""
    chosen = list(pins)
    async_to_sync(_forget)(get_store(), chosen)
    return _delete_rows(chosen)


def affinity_pins_clear_all() -> int:
    """Clear every pin, in the store and the table. Returns how many rows went."""
    async_to_sync(get_store().clear_prefix)(PIN_PREFIX)
    deleted, _ = SessionAffinityPin.objects.all().delete()
    return deleted


async def _forget(store: StateStore, pins: Sequence[tuple[str, str]]) -> None:
    for provider, key_hash in pins:
        await store.delete(pin_key(provider, key_hash))


def _moment(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def _save_row(provider: str, key_hash: str, pin: Pin) -> None:
    SessionAffinityPin.objects.update_or_create(
        provider_id=provider,
        key_hash=key_hash,
        defaults={
            "connection_id": pin.connection_id,
            "created_at": _moment(pin.created_at),
            "last_used_at": _moment(pin.last_used_at),
            "expires_at": _moment(pin.expires_at),
        },
    )


def _delete_row(provider: str, key_hash: str) -> None:
    SessionAffinityPin.objects.filter(provider_id=provider, key_hash=key_hash).delete()


def _delete_rows(pins: Sequence[tuple[str, str]]) -> int:
    deleted = 0
    for provider, key_hash in pins:
        count, _ = SessionAffinityPin.objects.filter(
            provider_id=provider, key_hash=key_hash
        ).delete()
        deleted += count
    return deleted


def _live_rows(now: float) -> list[tuple[str, str, Pin]]:
    rows = SessionAffinityPin.objects.filter(expires_at__gt=_moment(now))
    return [
        (
            row.provider_id,
            row.key_hash,
            Pin(
                row.connection_id,
                row.created_at.timestamp(),
                row.last_used_at.timestamp(),
                row.expires_at.timestamp(),
            ),
        )
        for row in rows
    ]


def _delete_lapsed(now: float) -> int:
    deleted, _ = SessionAffinityPin.objects.filter(expires_at__lte=_moment(now)).delete()
    return deleted
