"""Model lockouts in the state store: one record per connection, ``locks:<provider>:<id>``.

The record holds the connection's active locks and the failure states that escalate them, so
routing checks a connection's models with one read, and every change is one atomic update.
Expired entries are pruned on every write and the record's TTL follows its last lock, so
nothing accumulates; an active lock is never evicted early.

Each change that places or lifts a lock also writes the record to its database row
(``model_lock_records``), in the background like the other write-through, and before the answer
for an upstream-hinted lock (spec decision 18); the restore at start-up and after a store lost
its data loads the rows back (``lockout_restore``), so a restart keeps the models locked.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from resilience.domain.availability import AvailabilitySettings
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
from resilience.events import ResilienceEvent, emit
from resilience.persistence import persist_lock_record, persist_lock_records_cleared
from resilience.store import Json, StateStore

LOCK_PREFIX = "locks:"
PROBE_PREFIX = "pair-probe:"
RECORD_TTL_SECONDS = 31 * 24 * 3600.0  # beyond the longest lock (30-day upstream hints)
EVICTION_CAP = 1000  # failure states per connection (§5.5: MODEL_LOCKOUT_EVICTION_CAP)
logger = logging.getLogger("omniroute.resilience")


def lockout_key(provider: str, connection_id: int | str) -> str:
    return f"{LOCK_PREFIX}{provider}:{connection_id}"


@dataclass(slots=True)
class LockRecord:
    """A connection's locks and failure states, by model slot."""

    locks: dict[str, Lock] = field(default_factory=dict)
    failures: dict[str, FailureState] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: Json | None) -> LockRecord:
        if not isinstance(raw, dict):
            return cls()
        locks, fails = raw.get("locks"), raw.get("fails")
        return cls(
            {k: Lock.from_dict(v) for k, v in (locks or {}).items() if isinstance(v, dict)}
            if isinstance(locks, dict) else {},
            {k: FailureState.from_dict(v) for k, v in (fails or {}).items() if isinstance(v, dict)}
            if isinstance(fails, dict) else {},
        )  # fmt: skip

    def pruned(self, now: float) -> LockRecord:
        """Without expired locks and stale failure states, within the soft eviction cap."""
        locks = {k: lock for k, lock in self.locks.items() if lock.until > now}
        fails = {
            k: state
            for k, state in self.failures.items()
            if k in locks or now - state.last_failure_at <= state.window + state.last_cooldown
        }
        return LockRecord(locks, _evicted(fails, keep=set(locks)))

    def encode(self) -> dict[str, Any] | None:
        if not self.locks and not self.failures:
            return None
        return {
            "locks": {k: lock.to_dict() for k, lock in self.locks.items()},
            "fails": {k: state.to_dict() for k, state in self.failures.items()},
        }

    def lock_ends(self) -> dict[str, float]:
        return {slot: lock.until for slot, lock in self.locks.items()}

    def concerns(self, model: str) -> bool:
        """Whether the record holds a lock or a failure state of ``model``."""
        return any(s in self.failures or s in self.locks for s in model_slots(model))

    def awaiting_probe(self, model: str, threshold: int) -> float | None:
        """A pair whose run of transient failures locked it and whose lock has ended: the
        next request is its probe (decision 16). Returns the run's generation (its last
        failure time), or ``None``. The caller has checked that no lock holds it."""
        if not self.locked_in_run(model, threshold):
            return None
        return self.failures[model_slot(model, LockScope.EXACT)].last_failure_at

    def locked_in_run(self, model: str, threshold: int) -> bool:
        """Whether the pair's current run of transient failures has locked it: an attempt
        let through now (the probe after the lock, or a panic attempt through it) is the
        pair's probe (decision 25)."""
        state = self.failures.get(model_slot(model, LockScope.EXACT))
        return state is not None and state.consecutive >= threshold

    def awaiting_hinted_probe(self, model: str) -> float | None:
        """A pair whose upstream-hinted lock has ended with no success since: the next
        request is its probe, the others wait for its answer. Returns the lock's start (its
        generation), or ``None``."""
        state = self.failures.get(model_slot(model, LockScope.EXACT))
        return state.hinted_lock_at if state is not None and state.hinted_lock_at else None

    def lock_for(self, model: str, now: float) -> Lock | None:
        """The live lock with the latest end among the model's slots."""
        live = [self.locks[s] for s in model_slots(model) if s in self.locks]
        live = [lock for lock in live if lock.until > now]
        return max(live, key=lambda lock: lock.until, default=None)


def _evicted(failures: dict[str, FailureState], keep: set[str]) -> dict[str, FailureState]:
    """The soft cap of §5.5: over ``EVICTION_CAP`` entries, drop the oldest failure states,
    never one whose lock is still active."""
    excess = len(failures) - EVICTION_CAP
    if excess <= 0:
        return failures
    idle = sorted((s.last_failure_at, k) for k, s in failures.items() if k not in keep)
    doomed = {k for _, k in idle[:excess]}
    return {k: s for k, s in failures.items() if k not in doomed}


async def lockout_record(*, store: StateStore, provider: str, connection_id: int) -> LockRecord:
    """The connection's live locks (pruned)."""
    raw = await store.get(lockout_key(provider, connection_id))
    return LockRecord.decode(raw).pruned(store.clock())


async def _change(
    store: StateStore, provider: str, connection_id: int, step: Any, *, durable: bool = False
) -> LockRecord:
    """Apply ``step`` to the connection's record atomically. When its locks changed, write the
    record to the database: awaited with ``durable``, else in the background. A change of the
    failure counts alone is not written (they are short-lived: decision 14)."""
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
    """Record one failure of ``model`` on the connection and lock it (§5.3)."""
    slot = model_slot(model, scope)
    now = store.clock()

    def step(record: LockRecord) -> LockRecord:
        state, lock = record_failure(
            record.failures.get(slot), record.locks.get(slot), request, settings, now=now, tz=tz
        )
        record.failures[slot], record.locks[slot] = state, lock
        return record

    hinted = request.exact_is_upstream_reset  # decision 18: durable before the answer
    lock = (await _change(store, provider, connection_id, step, durable=hinted)).locks[slot]
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
    in the database before the answer (spec decision 18)."""
    slot = model_slot(model, LockScope.EXACT)
    now = store.clock()

    def step(record: LockRecord) -> LockRecord:
        state, lock = record_hinted(
            record.failures.get(slot),
            record.locks.get(slot),
            request,
            settings,
            now=now,
            tz=tz,
            short=short,
        )
        record.failures[slot] = state
        if lock is not None:
            record.locks[slot] = lock
        return record

    lock = (await _change(store, provider, connection_id, step, durable=True)).locks.get(slot)
    if lock is None or lock.locked_at != now:
        return None
    _log_lock(provider, connection_id, model, LockScope.EXACT, lock)
    return lock


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
    slot = model_slot(model, LockScope.EXACT)
    now = store.clock()

    def step(record: LockRecord) -> LockRecord:
        state, lock = record_transient(
            probe_settled(record.failures.get(slot)),
            record.locks.get(slot),
            reason=reason,
            availability=availability,
            now=now,
            window_seconds=window_seconds,
            probe=probe,
        )
        record.failures[slot] = state
        if lock is not None:
            record.locks[slot] = lock
        return record

    record = await _change(store, provider, connection_id, step)
    lock = record.locks.get(slot)
    if lock is None or lock.locked_at != now:
        return None
    _log_lock(provider, connection_id, model, LockScope.EXACT, lock)
    return lock


def _log_lock(provider: str, connection_id: int, model: str, scope: LockScope, lock: Lock) -> None:
    """One line per lock placed on a model (a kept, longer lock is not a new one)."""
    logger.warning(
        "model %s locked on %s connection %d for %.1f s (scope=%s, reason=%s, failures=%d)",
        model, provider, connection_id, lock.until - lock.locked_at, scope.value, lock.reason,
        lock.failure_count,
    )  # fmt: skip
    seconds = lock.until - lock.locked_at
    emit(ResilienceEvent(
        "model_lock", f"{provider}/{model} on connection {connection_id}", f"{seconds:.1f} s",
        {"provider": provider, "connection_id": connection_id, "model": model,
         "seconds": round(seconds, 3), "reason": lock.reason},
    ))  # fmt: skip


async def pair_probe_claim(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    generation: float,
    ttl: float,
) -> str | None:
    """Claim the one probe of a pair whose self-set lock just ended (decision 16); each lock
    (``generation``) has its own probe. The claim's key when this caller got it (to release
    it if the probe ends with no answer), else ``None``."""
    key = f"{PROBE_PREFIX}{provider}:{connection_id}:{model}:{generation!r}"
    return key if await store.incr(key, ttl=ttl) == 1 else None


async def pair_hinted_probe_claim(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    generation: float,
    ttl: float,
) -> str | None:
    """Claim the one probe of a pair whose hinted lock (started at ``generation``) has ended;
    the claim's key when this caller got it (to release it if the probe ends with no answer),
    else ``None``."""
    key = f"{PROBE_PREFIX}hinted:{provider}:{connection_id}:{model}:{generation!r}"
    return key if await store.incr(key, ttl=ttl) == 1 else None


async def pair_probe_release(*, store: StateStore, key: str) -> None:
    """Give a claimed probe back (it ended with no answer: the client left, the deadline ran
    out): the next waiting request may probe at once."""
    await store.delete(key)


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

    await _change(store, provider, connection_id, step)


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

        await _change(store, provider, int(connection), step)
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
        await _change(store, owner, record_connection, step)
    return removed


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


@dataclass(frozen=True, slots=True)
class LockView:
    """One active lock as the API and the admin list it (§5.6)."""

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
