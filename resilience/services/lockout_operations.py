"""Model-lockout operations for sync callers (the model-cooldowns API and the admin page).

The locks live only in the process state store (``resilience.state.get_store``), never in the
database, so each function runs the async service to completion on the gateway's event loop (or
a temporary one outside a server) and nothing needs flushing afterwards.

A lock knows its connection by id; the name shown next to it comes from routing, which owns the
connections and hands in the lookup (``register_connection_names``, from ``RoutingConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from asgiref.sync import async_to_sync

from resilience.services.lockouts import (
    LockView,
    lockout_clear_all,
    lockout_list,
    lockout_unlock,
)
from resilience.state import get_store

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


def lockouts_active() -> list[LabelledLock]:
    """Every active lock, longest remaining first, labelled with one lookup for the names."""
    locks = async_to_sync(lockout_list)(store=get_store())
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
    for lock in async_to_sync(lockout_list)(store=get_store()):
        grouped.setdefault(lock.connection_id, []).append(lock)
    return grouped


def lockouts_unlock(*, provider: str, model: str, connection_id: int | None = None) -> int:
    """Unlock ``model`` on one connection, or on every connection of ``provider``; the count."""
    unlock = async_to_sync(lockout_unlock)
    return unlock(store=get_store(), provider=provider, model=model, connection_id=connection_id)


def lockouts_clear() -> int:
    """Remove every lock of every connection; the number of connection records dropped."""
    return async_to_sync(lockout_clear_all)(store=get_store())
