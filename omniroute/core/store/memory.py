"""In-process ``StateStore`` backend (the default).

Atomicity: all state lives in plain dicts guarded by a single ``threading.Lock``.  Every
operation -- including the read-modify-write of ``update`` and the check-and-take of
``semaphore_acquire`` -- runs entirely while holding that lock and never awaits inside it, so
each call is atomic with respect to every coroutine, thread and event loop of *this process*.
Nothing is shared between processes: each process has its own independent state.

Expiry is logical (against the injected clock): expired entries are ignored and dropped when
read, and a full sweep runs at most every ``SWEEP_INTERVAL`` clock seconds so keys that are
never read again do not pile up.  Values are stored JSON-encoded, which gives the same
round-trip semantics as the Redis backend and keeps callers from mutating stored state.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ._shared import as_counter, check_window_args, decode, encode
from .base import Clock, Json, StateStore, Updater

_V = TypeVar("_V")

WINDOW_GRACE = 60.0
"""Clock seconds a window outlives its last event's window (mirrors the Redis backstop)."""


@dataclass(slots=True)
class _Record:
    raw: bytes
    expires_at: float | None

    def live(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at


@dataclass(slots=True)
class _Window:
    events: deque[tuple[float, int]] = field(default_factory=deque)
    horizon: float = -math.inf

    def trim(self, cutoff: float) -> None:
        while self.events and self.events[0][0] <= cutoff:
            self.events.popleft()


def _expiry(now: float, ttl: float | None) -> float | None:
    return None if ttl is None else now + ttl


def _sum_after(events: Iterable[tuple[float, int]], cutoff: float) -> int:
    return sum(amount for at, amount in events if at > cutoff)


def _drop_expired(holders: dict[str, float], now: float) -> None:
    for holder in [h for h, expires_at in holders.items() if expires_at <= now]:
        del holders[holder]


def _pop_prefix(entries: dict[str, _V], prefix: str) -> int:
    doomed = [key for key in entries if key.startswith(prefix)]
    for key in doomed:
        del entries[key]
    return len(doomed)


class MemoryStore(StateStore):
    """``StateStore`` kept in this process's memory; see the module docstring."""

    SWEEP_INTERVAL = 30.0

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}
        self._windows: dict[str, _Window] = {}
        self._semaphores: dict[str, dict[str, float]] = {}
        self._next_sweep = -math.inf

    def _now(self) -> float:
        """``now``, read while the caller holds ``self._lock`` (so it is monotonic per key);
        expired entries are swept first, at most every ``SWEEP_INTERVAL``. A plain call, not a
        generator context manager: every store operation of every request takes it."""
        now = self.clock()
        self._maybe_sweep(now)
        return now

    def _maybe_sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.SWEEP_INTERVAL
        self._records = {k: r for k, r in self._records.items() if r.live(now)}
        self._windows = {k: w for k, w in self._windows.items() if w.horizon > now}
        for holders in self._semaphores.values():
            _drop_expired(holders, now)
        self._semaphores = {k: h for k, h in self._semaphores.items() if h}

    def _live_record(self, key: str, now: float) -> _Record | None:
        record = self._records.get(key)
        if record is not None and not record.live(now):
            del self._records[key]
            return None
        return record

    def _read(self, key: str, now: float) -> Json | None:
        record = self._live_record(key, now)
        return None if record is None else decode(record.raw)

    # -- records -------------------------------------------------------------------------

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        with self._lock:
            now = self._now()
            record = self._live_record(key, now)
            if record is None:
                self._records[key] = _Record(encode(amount), _expiry(now, ttl))
                return amount
            value = as_counter(decode(record.raw)) + amount
            record.raw = encode(value)
            return value

    async def get_counter(self, key: str) -> int:
        with self._lock:
            now = self._now()
            return as_counter(self._read(key, now))

    async def get(self, key: str) -> Json | None:
        with self._lock:
            now = self._now()
            return self._read(key, now)

    async def get_many(self, keys: Sequence[str]) -> list[Json | None]:
        with self._lock:
            now = self._now()
            return [self._read(key, now) for key in keys]

    async def set(self, key: str, value: Json, *, ttl: float | None = None) -> None:
        raw = None if value is None else encode(value)
        with self._lock:
            now = self._now()
            if raw is None:
                self._records.pop(key, None)
            else:
                self._records[key] = _Record(raw, _expiry(now, ttl))

    async def delete(self, key: str) -> bool:
        with self._lock:
            now = self._now()
            if self._live_record(key, now) is None:
                return False
            del self._records[key]
            return True

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> Json | None:
        with self._lock:
            now = self._now()
            new = fn(self._read(key, now))
            if new is None:
                self._records.pop(key, None)
                return None
            raw = encode(new)
            self._records[key] = _Record(raw, _expiry(now, ttl))
            return decode(raw)

    async def scan(self, prefix: str) -> dict[str, Json]:
        with self._lock:
            now = self._now()
            return {
                key: decode(record.raw)
                for key, record in self._records.items()
                if key.startswith(prefix) and record.live(now)
            }

    # -- sliding windows -----------------------------------------------------------------

    async def window_add(self, key: str, *, window: float, amount: int = 1) -> int:
        check_window_args(window, amount)
        with self._lock:
            now = self._now()
            entry = self._windows.setdefault(key, _Window())
            entry.trim(now - window)
            entry.events.append((now, amount))
            entry.horizon = max(entry.horizon, now + window + WINDOW_GRACE)
            return _sum_after(entry.events, now - window)

    async def window_count(self, key: str, *, window: float) -> int:
        check_window_args(window)
        with self._lock:
            now = self._now()
            entry = self._windows.get(key)
            return 0 if entry is None else _sum_after(entry.events, now - window)

    async def window_clear(self, key: str) -> None:
        with self._lock:
            self._now()
            self._windows.pop(key, None)

    # -- semaphores ----------------------------------------------------------------------

    async def semaphore_acquire(self, key: str, holder: str, *, limit: int, ttl: float) -> bool:
        with self._lock:
            now = self._now()
            holders = self._semaphores.setdefault(key, {})
            _drop_expired(holders, now)
            if holder not in holders and len(holders) >= limit:
                return False
            holders[holder] = now + ttl
            return True

    async def semaphore_release(self, key: str, holder: str) -> bool:
        with self._lock:
            now = self._now()
            holders = self._semaphores.get(key, {})
            _drop_expired(holders, now)
            return holders.pop(holder, None) is not None

    async def semaphore_refresh(self, key: str, holder: str, *, ttl: float) -> bool:
        with self._lock:
            now = self._now()
            holders = self._semaphores.get(key, {})
            _drop_expired(holders, now)
            if holder not in holders:
                return False
            holders[holder] = now + ttl
            return True

    async def semaphore_count(self, key: str) -> int:
        with self._lock:
            now = self._now()
            holders = self._semaphores.get(key, {})
            return sum(1 for expires_at in holders.values() if expires_at > now)

    # -- maintenance ---------------------------------------------------------------------

    async def clear_prefix(self, prefix: str) -> int:
        with self._lock:
            self._now()
            return (
                _pop_prefix(self._records, prefix)
                + _pop_prefix(self._windows, prefix)
                + _pop_prefix(self._semaphores, prefix)
            )

    async def close(self) -> None:
        """Nothing to release; the state stays usable."""
