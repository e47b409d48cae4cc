"""Model lockouts in the state store: one record per connection, ``locks:<provider>:<id>``.

The record holds the connection's active locks and the failure states that escalate them, so
routing checks a connection's models with one read, and every change is one atomic update.
Expired entries are pruned on every write and the record's TTL follows its last lock, so
nothing accumulates; an active lock is never evicted early.

Each change that places or lifts a lock also writes the record to its database row
(``model_lock_records``), in the background like the other write-through, and before the answer
for an upstream-hinted lock; the restore at start-up and after a store lost
its data loads the rows back (``lockout_restore``), so a restart keeps the models locked.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from omniroute.core.events import ResilienceEvent, emit
from omniroute.core.store import NOT_READ, Json, NotRead, StateStore
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.lock_record import LockRecord
from resilience.domain.lockout import (
    FailureState,
    Lock,
    LockoutSettings,
    LockRequest,
    LockScope,
    decay,
    model_slot,
    model_slots,
    probe_settled,
    record_failure,
    record_hinted,
    record_transient,
)
from resilience.persistence import persist_lock_record

LOCK_PREFIX = "locks:"
RECORD_TTL_SECONDS = 31 * 24 * 3600.0  # beyond the longest lock (30-day upstream hints)
logger = logging.getLogger("omniroute.resilience")


def lockout_key(provider: str, connection_id: int | str) -> str:
    return f"{LOCK_PREFIX}{provider}:{connection_id}"


async def lockout_record(
    *, store: StateStore, provider: str, connection_id: int, raw: Json | NotRead = NOT_READ
) -> LockRecord:
    """The connection's live locks (pruned); ``raw``: the record as the caller read it already
    (``lockout_key``)."""
    if raw is NOT_READ:
        raw = await store.get(lockout_key(provider, connection_id))
    if raw is None:  # no record: nothing to decode or prune
        return LockRecord()
    return LockRecord.decode(raw).pruned(store.clock())


async def lockout_change(
    store: StateStore, provider: str, connection_id: int, step: Any, *, durable: bool = False
) -> LockRecord:
    """Apply ``step`` to the connection's record atomically. When its locks changed, write the
    record to the database: awaited with ``durable``, else in the background. A change of the
    failure counts alone is not written (they are short-lived)."""
    now = store.clock()
    result, before = LockRecord(), {}

    def updater(raw: Json | None) -> Json | None:
        nonlocal result, before
        current = LockRecord.decode(raw).pruned(now)
        before = current.lock_ends()
        result = step(current)
        return result.encode()

    # Entries are pruned on every write; the TTL only bounds a record nobody touches again
    # (at most one per connection), so a fixed, generous one is enough.
    await store.update(lockout_key(provider, connection_id), updater, ttl=RECORD_TTL_SECONDS)
    ends = result.lock_ends()
    if ends != before:  # the row lives as long as the record's last lock; none: no row
        kept = result.encode() if ends else None
        written = persist_lock_record(provider, connection_id, kept, max(ends.values(), default=0))
        if durable:
            await written
    return result


async def lockout_record_failure(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    scope: LockScope,
    request: LockRequest,
    settings: LockoutSettings,
    tz: dt.tzinfo,
) -> Lock:
    """Record one failure of ``model`` on the connection and lock it."""
    slot = model_slot(model, scope)
    now = store.clock()

    def step(record: LockRecord) -> LockRecord:
        state, lock = record_failure(
            record.failures.get(slot), record.locks.get(slot), request, settings, now=now, tz=tz
        )
        record.failures[slot], record.locks[slot] = state, lock
        return record

    hinted = request.exact_is_upstream_reset  # a hinted lock is durable before the answer
    lock = (await lockout_change(store, provider, connection_id, step, durable=hinted)).locks[slot]
    if lock.locked_at == now:  # else a longer lock already in place was kept
        _log_lock(provider, connection_id, model, scope, lock)
    return lock


async def pair_record_hinted(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    request: LockRequest,
    settings: LockoutSettings,
    tz: dt.tzinfo,
    short: bool,
) -> Lock | None:
    """Record one hinted refusal of the pair; the lock it placed for everyone, if any (a
    ``short`` hint locks only on evidence of a real limit: ``record_hinted``). A placed lock is
    in the database before the answer."""
    now = store.clock()

    def placed(state: FailureState | None, lock: Lock | None) -> tuple[FailureState, Lock | None]:
        return record_hinted(state, lock, request, settings, now=now, tz=tz, short=short)

    return await _pair_step(store, provider, connection_id, model, placed, durable=True)


async def pair_record_transient(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    reason: str,
    availability: AvailabilitySettings,
    window_seconds: float = 0.0,
    probe: bool = False,
) -> Lock | None:
    """Count one transient failure of the pair; lock it once enough ran in a row, and double
    the lock when the failure was its probe's (``probe``: the attempt held the pair's probe)."""
    now = store.clock()

    def placed(state: FailureState | None, lock: Lock | None) -> tuple[FailureState, Lock | None]:
        return record_transient(
            probe_settled(state),
            lock,
            reason=reason,
            availability=availability,
            now=now,
            window_seconds=window_seconds,
            probe=probe,
        )

    return await _pair_step(store, provider, connection_id, model, placed)


PairStep = Callable[[FailureState | None, Lock | None], tuple[FailureState, Lock | None]]


async def _pair_step(
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    step: PairStep,
    *,
    durable: bool = False,
) -> Lock | None:
    """Apply ``step`` to the pair's failure state and lock in one atomic update; the lock it
    placed now, if any (a longer lock kept in place is not a new one), logged."""
    slot = model_slot(model, LockScope.EXACT)
    now = store.clock()

    def change(record: LockRecord) -> LockRecord:
        state, lock = step(record.failures.get(slot), record.locks.get(slot))
        record.failures[slot] = state
        if lock is not None:
            record.locks[slot] = lock
        return record

    lock = (
        await lockout_change(store, provider, connection_id, change, durable=durable)
    ).locks.get(slot)
    if lock is None or lock.locked_at != now:
        return None
    _log_lock(provider, connection_id, model, LockScope.EXACT, lock)
    return lock


def _log_lock(provider: str, connection_id: int, model: str, scope: LockScope, lock: Lock) -> None:
    """One line per lock placed on a model (a kept, longer lock is not a new one)."""
    logger.warning(
        "model %s locked on %s connection %d for %.1f s (scope=%s, reason=%s, failures=%d)",
        model,
        provider,
        connection_id,
        lock.until - lock.locked_at,
        scope.value,
        lock.reason,
        lock.failure_count,
    )
    seconds = lock.until - lock.locked_at
    emit(
        ResilienceEvent(
            "model_lock",
            f"{provider}/{model} on connection {connection_id}",
            f"{seconds:.1f} s",
            {
                "provider": provider,
                "connection_id": connection_id,
                "model": model,
                "seconds": round(seconds, 3),
                "reason": lock.reason,
            },
        )
    )


async def lockout_record_success(
    *, store: StateStore, provider: str, connection_id: int, model: str
) -> None:
    """Success decay: halve the model's failure counts and end its run of transient failures;
    at 0 drop the state and the lock. A self-set lock always goes (the probe succeeded)."""

    def step(record: LockRecord) -> LockRecord:
        for slot in model_slots(model):
            after = decay(record.failures.get(slot))
            lock = record.locks.get(slot)
            if after is None:
                record.failures.pop(slot, None)
                record.locks.pop(slot, None)
            else:
                record.failures[slot] = after
                if lock is not None and lock.self_set:
                    record.locks.pop(slot, None)
        return record

    await lockout_change(store, provider, connection_id, step)


async def lockout_restore(
    *, store: StateStore, rows: dict[tuple[str, int], dict[str, Any]], overwrite: bool = False
) -> int:
    """Load persisted lock records into the store: where it has none (a cold start), or over
    what it has (``overwrite``: the database wins after an outage). Returns how many locks
    were loaded."""
    now, restored = store.clock(), 0
    for (provider, connection_id), data in rows.items():
        record = LockRecord.decode(data).pruned(now)
        if not record.locks:
            continue
        loaded = False

        def updater(raw: Json | None, record: LockRecord = record) -> Json | None:
            nonlocal loaded
            loaded = overwrite or raw is None
            return record.encode() if loaded else raw

        await store.update(lockout_key(provider, connection_id), updater, ttl=RECORD_TTL_SECONDS)
        restored += len(record.locks) if loaded else 0
    return restored
