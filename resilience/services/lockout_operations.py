"""The operator's verbs on model lockouts: list, unlock and clear, as async services on the
store and as wrappers for sync callers (the model-cooldowns API and the admin page).

The locks live in the process state store (``omniroute.core.state.get_store``), with a durable copy
in the database; each function runs the async service to completion on the gateway's event loop
(or a temporary one outside a server), after the start-up restore (a process that has served
no request yet still lists, and unlocks, the locks it restarted with) and waits for the
write-through, so an unlock the answer reports is in the database too.

A lock knows its connection by id; the name shown next to it comes from routing, which owns the
connections and hands in the lookup (``resilience.hooks``, filled by ``RoutingConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from asgiref.sync import async_to_sync

from omniroute.core import tasks
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from resilience.domain.lock_record import LockRecord
from resilience.domain.lockout import model_slots
from resilience.hooks import hooks
from resilience.persistence import persist_lock_records_cleared
from resilience.services.housekeeping import resilience_ready
from resilience.services.lockouts import LOCK_PREFIX, lockout_change, lockout_key

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LabelledLock:
    """An active lock with its connection's name (the id when the connection is gone)."""

    lock: LockView
    account_label: str


def _run(work: Callable[[StateStore], Awaitable[T]]) -> T:
    async def ready_then() -> T:
        store = get_store()
        await resilience_ready(store, chores=False)
        result = await work(store)
        await tasks.flush()
        return result

    return async_to_sync(ready_then)()


def lockouts_active() -> list[LabelledLock]:
    """Every active lock, longest remaining first, labelled with one lookup for the names."""
    locks = _run(lambda store: lockout_list(store=store))
    ids = {lock.connection_id for lock in locks}
    names = hooks().connection_names(ids) if ids else {}
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


# The operator's verbs on locks, async: what the wrappers above run on the store.


async def lockout_unlock(
    *, store: StateStore, provider: str, model: str, connection_id: int | None = None
) -> int:
    """Remove the model's locks on one connection, or on all of the provider's. Returns count."""
    removed = 0
    for key in await _keys(store, provider, connection_id):
        _, _, connection = key.rpartition(":")

        def step(record: LockRecord) -> LockRecord:
            nonlocal removed
            for slot in model_slots(model):
                removed += slot in record.locks
                record.locks.pop(slot, None)
                record.failures.pop(slot, None)
            return record

        await lockout_change(store, provider, int(connection), step)
    return removed


async def _keys(store: StateStore, provider: str, connection_id: int | None) -> list[str]:
    if connection_id is not None:
        return [lockout_key(provider, connection_id)]
    return list(await store.scan(f"{LOCK_PREFIX}{provider}:"))


async def lockout_clear_all(*, store: StateStore) -> int:
    """Remove every lock of every connection. Returns how many records were dropped."""
    dropped = await store.clear_prefix(LOCK_PREFIX)
    persist_lock_records_cleared()
    return dropped


async def lockout_clear_matching(
    *, store: StateStore, provider: str | None = None, connection_id: int | None = None
) -> int:
    """Remove every lock (and failure state) of the provider's connections, of one connection
    (whatever its provider), or of that connection of the provider; at least one of the two is
    given. Returns how many active locks were removed."""
    if not provider and connection_id is None:
        raise ValueError("name a provider or a connection; lockout_clear_all clears everything")
    if provider and connection_id is not None:
        records = [(provider, connection_id)]
    else:
        records = []
        for key in await store.scan(f"{LOCK_PREFIX}{provider}:" if provider else LOCK_PREFIX):
            owner, _, connection = key[len(LOCK_PREFIX) :].rpartition(":")
            if connection_id is None or connection == str(connection_id):
                records.append((owner, int(connection)))
    removed = 0

    def step(record: LockRecord) -> LockRecord:
        nonlocal removed
        removed += len(record.locks)  # the record comes pruned: active locks only
        return LockRecord()

    for owner, record_connection in records:
        await lockout_change(store, owner, record_connection, step)
    return removed


@dataclass(frozen=True, slots=True)
class LockView:
    """One active lock as the API and the admin list it."""

    provider: str
    connection_id: int
    model: str
    reason: str
    remaining_ms: int
    failure_count: int
    locked_at: float
    until: float
    exact: bool
    timer: str = ""


async def lockout_list(*, store: StateStore) -> list[LockView]:
    """Every active lock, longest remaining first."""
    now = store.clock()
    views = []
    for key, raw in (await store.scan(LOCK_PREFIX)).items():
        provider, _, connection = key[len(LOCK_PREFIX) :].rpartition(":")
        for slot, lock in LockRecord.decode(raw).pruned(now).locks.items():
            kind, _, model = slot.partition(":")
            views.append(
                LockView(
                    provider,
                    int(connection),
                    model,
                    lock.reason,
                    int(lock.remaining(now) * 1000),
                    lock.failure_count,
                    lock.locked_at,
                    lock.until,
                    kind == "x",
                    lock.timer,
                )
            )
    return sorted(views, key=lambda view: view.remaining_ms, reverse=True)
