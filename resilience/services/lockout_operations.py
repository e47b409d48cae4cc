"""Model-lockout operations for sync callers (the model-cooldowns API and the admin page).

The locks live only in the process state store (``resilience.state.get_store``), never in the
database, so each function runs the async service to completion on the gateway's event loop (or
a temporary one outside a server) and nothing needs flushing afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import async_to_sync

from resilience.services.lockouts import (
    LockView,
    lockout_clear_all,
    lockout_list,
    lockout_unlock,
)
from resilience.state import get_store
from routing.models import ProviderConnection


@dataclass(frozen=True, slots=True)
class LabelledLock:
    """An active lock with its connection's name (the id when the connection is gone)."""

    lock: LockView
    account_label: str


def lockouts_active() -> list[LabelledLock]:
    """Every active lock, longest remaining first, labelled with one query for the names."""
    locks = async_to_sync(lockout_list)(store=get_store())
    ids = {lock.connection_id for lock in locks}
    names = dict(ProviderConnection.objects.filter(pk__in=ids).values_list("pk", "name"))
    return [
        LabelledLock(lock, names.get(lock.connection_id) or str(lock.connection_id))
        for lock in locks
    ]


def lockouts_unlock(*, provider: str, model: str, connection_id: int | None = None) -> int:
    """Unlock ``model`` on one connection, or on every connection of ``provider``; the count."""
    unlock = async_to_sync(lockout_unlock)
    return unlock(store=get_store(), provider=provider, model=model, connection_id=connection_id)


def lockouts_clear() -> int:
    """Remove every lock of every connection; the number of connection records dropped."""
    return async_to_sync(lockout_clear_all)(store=get_store())
