"""The ``StateStore`` contract: short-lived shared state for the gateway.

A state store keeps the small, frequently-changing pieces of state that the resilience layer
needs (circuit breakers, cooldown windows, concurrency slots, counters).  Everything in it is
allowed to disappear: values carry optional TTLs and the store is not a database.

There are four independent families of keys, each in its own namespace (the same ``key`` may
be used by several families without clashing):

* **records** -- JSON values (``get``/``get_many``/``set``/``update``/``delete``/``scan``).
  Counters (``incr``/``get_counter``) are records whose value is an integer, so ``get`` on a
  counter returns the int and ``scan`` lists counters too.
* **windows** -- sliding time windows of events (``window_*``).
* **semaphores** -- sets of holders with per-holder expiry (``semaphore_*``).

Time is *logical*: every backend takes ``now`` from its injected ``clock`` (``time.time`` by
default) and compares stored expiry timestamps against it, so a fake clock drives expiry in
tests on every backend alike.  An expiry timestamp ``t`` is reached when ``now >= t``; an event
recorded at ``t`` leaves a window of ``w`` seconds when ``now >= t + w``.

Values go through a JSON round trip in every backend (tuples come back as lists, stored
objects are never shared with the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from enum import Enum
from typing import Final, Protocol, TypeAlias, runtime_checkable

Json: TypeAlias = dict[str, "Json"] | list["Json"] | str | int | float | bool | None
"""A JSON-serialisable value."""

Clock: TypeAlias = Callable[[], float]
"""Returns the current time in seconds (same scale as ``time.time``)."""

Updater: TypeAlias = Callable[[Json | None], Json | None]
"""Pure, fast, synchronous function used by ``StateStore.update``."""


class NotRead(Enum):
    """The type of :data:`NOT_READ`."""

    NOT_READ = "not read"


NOT_READ: Final = NotRead.NOT_READ
"""A record not read yet: a function that reads one record takes its value instead of reading
it when a caller has read it already (several records read ahead with ``get_many``)."""


class StoreConflictError(RuntimeError):
    """An optimistic ``update`` kept losing races and gave up after its retry budget."""


class StoreRestartedError(Exception):
    """The store's server restarted (so it may have lost its data) since the store last used it.

    Raised before the call reached the new server: nothing of it was applied.  The owner puts
    the durable state back (its calls under ``RESTORING`` reach the new server all the same),
    then calls ``accept()``, after which the store serves every call from the new server.
    Only a store asked to (``RedisStore.refuse_restarted``) raises it.
    """

    def accept(self) -> None:
        """Serve every call from the new server from now on."""


RESTORING: ContextVar[bool] = ContextVar("omniroute_store_restoring", default=False)
"""True in the calls that put durable state back into a restarted store (see
``StoreRestartedError``)."""


@runtime_checkable
class StateStore(Protocol):
    """Async interface of the shared state store (see the module docstring)."""

    clock: Clock

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """Atomically add ``amount`` to the integer record ``key`` and return the new value.

        An absent or expired record starts from 0; ``ttl`` (seconds) is applied only when the
        counter is created this way and is kept unchanged by later increments.  Raises
        ``TypeError`` if the record holds a non-integer value.
        """
        ...

    async def get_counter(self, key: str) -> int:
        """Return the integer record ``key``, or 0 when it is absent or expired."""
        ...

    async def get(self, key: str) -> Json | None:
        """Return the live value of record ``key``, or ``None`` when absent or expired."""
        ...

    async def get_many(self, keys: Sequence[str]) -> list[Json | None]:
        """The live values of records ``keys``, in their order (``None`` for each one absent or
        expired), read in one round trip where the backend has round trips. Each value is as
        ``get`` would return it; the reads are not one atomic snapshot."""
        ...

    async def set(self, key: str, value: Json, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value and expiry.

        ``ttl`` is in seconds; ``None`` means the record never expires.  ``None`` is never
        stored: ``set(key, None)`` deletes the record (as ``update`` does), so ``get``
        returning ``None`` always means "absent".
        """
        ...

    async def delete(self, key: str) -> bool:
        """Remove record ``key``; return True if a live record was removed."""
        ...

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> Json | None:
        """Atomically replace the value of ``key`` with ``fn(current)`` and return it.

        ``current`` is ``None`` when the record is absent or expired.  The result is stored
        with ``ttl`` (``None``: no expiry); if ``fn`` returns ``None`` the record is deleted.
        Concurrent updates (also from other processes, for shared backends) are serialised:
        none is lost.  ``fn`` may be called more than once, so it must be pure and must not
        touch the store.  An exception raised by ``fn`` propagates and leaves the record as it
        was.
        """
        ...

    async def scan(self, prefix: str) -> dict[str, Json]:
        """Return all live records whose key starts with ``prefix`` (not a snapshot)."""
        ...

    async def window_add(self, key: str, *, window: float, amount: int = 1) -> int:
        """Record ``amount`` events now in window ``key`` and return the events in the window.

        Events that left the window (recorded at or before ``now - window``) are dropped; the
        returned count includes this call's events.
        """
        ...

    async def window_count(self, key: str, *, window: float) -> int:
        """Return the number of events recorded after ``now - window`` (read-only)."""
        ...

    async def window_clear(self, key: str) -> None:
        """Forget every event of window ``key``."""
        ...

    async def semaphore_acquire(self, key: str, holder: str, *, limit: int, ttl: float) -> bool:
        """Try to take a slot of semaphore ``key`` for ``holder`` for ``ttl`` seconds.

        Expired holders are dropped first (this is how slots of dead holders come back).  A
        holder that already holds a slot gets its expiry refreshed and True, without taking
        a second slot.  Otherwise the slot is granted only if fewer than ``limit`` live
        holders remain.
        """
        ...

    async def semaphore_release(self, key: str, holder: str) -> bool:
        """Give back ``holder``'s slot; return True if it held a live slot."""
        ...

    async def semaphore_refresh(self, key: str, holder: str, *, ttl: float) -> bool:
        """Extend ``holder``'s slot to ``now + ttl``; False if it no longer holds a slot."""
        ...

    async def semaphore_count(self, key: str) -> int:
        """Return the number of live holders of semaphore ``key``."""
        ...

    async def clear_prefix(self, prefix: str) -> int:
        """Delete every record, window and semaphore whose key starts with ``prefix``.

        Returns the number of stored keys removed (this may include logically expired keys
        that had not been garbage-collected yet).  ``clear_prefix("")`` empties the store.
        """
        ...

    async def close(self) -> None:
        """Release connections held by the store (no-op for in-process backends)."""
        ...
