"""Model-lockout operations for sync callers (the model-cooldowns API and the admin page).

The locks live in the process state store (``resilience.state.get_store``), with a durable copy
in the database; each function runs the async service to completion on the gateway's event loop
(or a temporary one outside a server), after the start-up restore (a process that has served
no request yet still lists, and unlocks, the locks it restarted with) and waits for the
write-through, so an unlock the answer reports is in the database too.

A lock knows its connection by id; the name shown next to it comes from routing, which owns the
connections and hands in the lookup (``register_connection_names``, from ``RoutingConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

from asgiref.sync import async_to_sync

from resilience.persistence import persistence_flush
from resilience.services.housekeeping import resilience_ready
from resilience.services.lockouts import (
    LockView,
    lockout_clear_all,
    lockout_clear_matching,
    lockout_list,
    lockout_unlock,
)
from resilience.state import get_store
from resilience.store import StateStore

T = TypeVar("T")

ConnectionNames = Callable[[Collection[int]], Mapping[int, str]]
"""Names of the given connection ids (one query); ids of missing connections are left out."""


@dataclass(frozen=True, slots=True)
class LabelledLock:
    """An active lock with its connection's name (the id when the connection is gone)."""

    lock: LockView
    account_label: str


@dataclass(slots=True)
class _Lookups:
    names: ConnectionNames | None = None


_lookups = _Lookups()


def register_connection_names(lookup: ConnectionNames) -> None:
    """Name connections with ``lookup``; without one, locks are labelled by connection id."""
    _lookups.names = lookup


def _run(work: Callable[[StateStore], Awaitable[T]]) -> T:
    async def ready_then() -> T:
        store = get_store()
        await resilience_ready(store, chores=False)
        result = await work(store)
        await persistence_flush()
        return result

    return async_to_sync(ready_then)()


def lockouts_active() -> list[LabelledLock]:
    """Every active lock, longest remaining first, labelled with one lookup for the names."""
    locks = _run(lambda store: lockout_list(store=store))
    ids = {lock.connection_id for lock in locks}
    names = _lookups.names(ids) if ids and _lookups.names is not None else {}
    return [
        LabelledLock(lock, names.get(lock.connection_id) or str(lock.connection_id))
        for lock in locks
    ]


def lockouts_by_connection() -> dict[int, list[LockView]]:
    """Every active lock, grouped by connection id (longest remaining first): one store scan,
    for a page that shows each connection's locked models."""
    grouped: dict[int, list[LockView]] = {}
    for lock in _run(lambda store: lockout_list(store=store)):
        grouped.setdefault(lock.connection_id, []).append(lock)
    return grouped


def lockouts_unlock(*, provider: str, model: str, connection_id: int | None = None) -> int:
    """Unlock ``model`` on one connection, or on every connection of ``provider``; the count."""
    return _run(
        lambda store: lockout_unlock(
            store=store, provider=provider, model=model, connection_id=connection_id
        )
    )


def lockouts_clear() -> int:
    """Remove every lock of every connection; the number of connection records dropped."""
    return _run(lambda store: lockout_clear_all(store=store))


def lockouts_clear_matching(
    *, provider: str | None = None, connection_id: int | None = None
) -> int:
    """Remove every lock of the provider's connections, of one connection, or of that
    connection of the provider; the number of active locks removed."""
    return _run(
        lambda store: lockout_clear_matching(
            store=store, provider=provider, connection_id=connection_id
        )
    )
