"""Provider circuit breakers kept in the state store and written through to the database.

The store is authoritative at run time; every change is also written (in order, in the
background, best effort) to ``domain_circuit_breakers`` so that a restart restores it. Each
operation is one atomic ``store.update``, so two processes sharing a Redis store never lose a
failure and never hand out the same half-open probe slot twice.

A provider without a record is a fresh CLOSED breaker: the hot path for a healthy provider is a
single store read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from omniroute.core.events import ResilienceEvent, emit
from omniroute.core.store import NOT_READ, Json, NotRead, StateStore
from resilience.domain.breaker.machine import (
    Breaker,
    BreakerPolicy,
    BreakerState,
    FailureKind,
    Permit,
)
from resilience.persistence import persist_breaker, persist_breaker_deleted

BREAKER_PREFIX = "breaker:"
NETWORK_DEDUP_PREFIX = "breaker-dedup:net:"
CONNECTION_DEDUP_PREFIX = "breaker-dedup:conn:"
NETWORK_DEDUP_SECONDS = 10.0
CONNECTION_DEDUP_SECONDS = 5.0
IDLE_SWEEP_SECONDS = 30 * 60.0
REGISTRY_CAP = 500

FRESH_PERMIT = Permit(probe=False, generation=0)
FRESH_BREAKER = Breaker()  # a provider with no record (immutable: one for every request)
logger = logging.getLogger("omniroute.resilience")


def breaker_key(name: str) -> str:
    return f"{BREAKER_PREFIX}{name}"


@dataclass(slots=True)
class _Change:
    """What an atomic update saw and produced (the updater may run more than once)."""

    before: Breaker | None = None
    after: Breaker | None = None
    permit: Permit | None = None


def _decode(raw: Json | None) -> Breaker | None:
    return Breaker.from_dict(raw) if isinstance(raw, dict) else None


async def _apply(
    store: StateStore,
    name: str,
    step: Callable[[Breaker], tuple[Breaker, Permit | None]],
    policy: BreakerPolicy | None = None,
) -> _Change:
    """Atomically run ``step`` on the stored breaker and store the result."""
    change = _Change()

    def updater(raw: Json | None) -> Json | None:
        change.before = _decode(raw)
        change.after, change.permit = step(change.before or Breaker())
        if change.before is None and change.after == Breaker():
            return None  # still pristine: keep the provider without a record
        return change.after.to_dict()

    await store.update(breaker_key(name), updater)
    _log_transition(name, change)
    if change.after is not None and change.after != change.before:
        written = persist_breaker(name, change.after, policy)
        was_open = change.before is not None and change.before.state is BreakerState.OPEN
        if change.after.state is BreakerState.OPEN and not was_open:
            await written  # an opening is durable before the answer
    return change


def _log_transition(name: str, change: _Change) -> None:
    """One line per state change (the updater may have run more than once: this runs once)."""
    before = BreakerState.CLOSED if change.before is None else change.before.state
    if change.after is None or change.after.state is before:
        return
    after = change.after.state
    level = logging.WARNING if after is BreakerState.OPEN else logging.INFO
    logger.log(
        level,
        "breaker %s: %s -> %s (failures=%d)",
        name,
        before.value,
        after.value,
        change.after.failure_count,
    )
    emit(
        ResilienceEvent(
            "breaker",
            name,
            f"{before.value} -> {after.value}",
            {"from": before.value, "to": after.value, "failures": change.after.failure_count},
        )
    )


async def breaker_get(*, store: StateStore, name: str) -> Breaker:
    """The stored breaker as it is (not refreshed); a fresh one when there is no record."""
    return _decode(await store.get(breaker_key(name))) or Breaker()


async def breaker_acquire(
    *, store: StateStore, name: str, policy: BreakerPolicy, raw: Json | NotRead = NOT_READ
) -> tuple[Breaker, Permit | None]:
    """Take the right to send one request now: a permit, or ``None`` while it cannot execute.

    In HALF_OPEN this takes one probe slot atomically; the permit's generation lets the
    outcome be matched to the probe (a late result of a stale probe is ignored). ``raw``: the
    breaker's record as the caller read it already (``breaker_key``); taking a slot reads it
    again, atomically.
    """
    if raw is NOT_READ:
        raw = await store.get(breaker_key(name))
    stored = _decode(raw)
    if stored is None:
        return FRESH_BREAKER, FRESH_PERMIT
    now = store.clock()
    current = stored.refreshed(policy, now)
    if current.state in (BreakerState.CLOSED, BreakerState.DEGRADED):
        return current, Permit(probe=False, generation=current.probe_generation)  # read-only
    change = await _apply(store, name, lambda b: b.acquire(policy, now), policy)
    assert change.after is not None
    return change.after, change.permit


async def breaker_record_failure(
    *,
    store: StateStore,
    name: str,
    policy: BreakerPolicy,
    connection_id: int | None = None,
    network: bool = False,
    kind: FailureKind | None = None,
    permit: Permit | None = None,
    source: str | None = None,
) -> Breaker | None:
    """Count one failure, unless a window drops it.

    Network failures are de-duplicated per provider for 10 s, and any failure per
    (provider, connection) for 5 s: a dropped failure still counts in the failure-rate window,
    never towards the consecutive thresholds. ``source`` names the (connection, model) pair of a
    5xx or timeout: such a failure counts only once another pair of the provider failed within
    the window (otherwise it is pinned to its pair and is just a call). A failure arriving while
    the breaker cannot execute is dropped, so the open timer is not pushed forward. Returns the
    breaker after a counted failure, or ``None`` when nothing was counted. An attempt that began
    with :data:`FRESH_PERMIT` (no record yet) is not counted in a failure-rate window that opened
    while it ran: its success would not have been, and counting only its failure would make a
    burst of concurrent calls look like a failure rate far above the real one.
    """
    probe = permit is not None and permit.probe
    # The attempt began while the provider had no record: its success would not be recorded
    # (the hot path skips it), so its failure is no call of a window another failure opened.
    fresh = permit is FRESH_PERMIT
    now = store.clock()
    pinned = source is not None and not network and not probe
    relevant = True
    if pinned and source is not None:  # a plain read: only what may count claims a dedup window
        window = (await breaker_get(store=store, name=name)).window.live(now, policy.window)
        relevant = window.with_source(source, now, policy.window)[1]
    first = probe or (
        (not pinned or relevant) and await _first_in_windows(store, name, connection_id, network)
    )
    counted = False

    def step(breaker: Breaker) -> tuple[Breaker, Permit | None]:
        nonlocal counted
        if not probe and not breaker.can_execute(policy, now):
            return breaker.refreshed(policy, now), None
        relevant = True
        if pinned and source is not None:
            window, relevant = breaker.window.live(now, policy.window).with_source(
                source, now, policy.window
            )
            breaker = replace(breaker, window=window)
        counted = first and relevant
        after = breaker.after_failure(
            policy, now, kind, permit, counted=counted, relevant=relevant, windowed=not fresh
        )
        return after, None

    after = (await _apply(store, name, step, policy)).after
    return after if counted else None


async def _first_in_windows(
    store: StateStore, name: str, connection_id: int | None, network: bool
) -> bool:
    if network and not await _claim(store, f"{NETWORK_DEDUP_PREFIX}{name}", NETWORK_DEDUP_SECONDS):
        return False
    if connection_id is None:
        return True
    key = f"{CONNECTION_DEDUP_PREFIX}{name}:{connection_id}"
    return await _claim(store, key, CONNECTION_DEDUP_SECONDS)


async def _claim(store: StateStore, key: str, ttl: float) -> bool:
    """Atomically mark ``key`` for ``ttl`` seconds; False when it was already marked."""
    return await store.incr(key, ttl=ttl) == 1  # the ttl is set once: repeats never extend it


async def breaker_record_success(
    *,
    store: StateStore,
    name: str,
    policy: BreakerPolicy,
    connection_id: int | None = None,
    permit: Permit | None = None,
) -> Breaker:
    """Count one success: gradual recovery, or a probe's success closing HALF_OPEN."""
    stored = _decode(await store.get(breaker_key(name)))
    if stored is None:
        return Breaker()  # no failure on record, so no de-duplication entry either
    now = store.clock()
    quiet = stored.state is BreakerState.CLOSED and stored.failure_count == 0
    if quiet and not stored.window_active(policy, now):
        return stored  # nothing a success could change (the hot path after recovery)
    if connection_id is not None and stored.failure_count:
        await store.delete(f"{CONNECTION_DEDUP_PREFIX}{name}:{connection_id}")

    def step(breaker: Breaker) -> tuple[Breaker, Permit | None]:
        current = breaker.refreshed(policy, now)
        if current.state is BreakerState.OPEN:
            return breaker, None  # a late success while open changes nothing
        return current.after_success(policy, now, permit), None

    change = await _apply(store, name, step, policy)
    assert change.after is not None
    return change.after


async def breaker_release(*, store: StateStore, name: str, permit: Permit) -> None:
    """Give a probe slot back with no result (its attempt was cancelled before it answered:
    a hedge that lost), so the next request may probe at once."""
    if not permit.probe:
        return
    await _apply(store, name, lambda breaker: (breaker.released(permit), None))


async def breaker_reset(*, store: StateStore, name: str) -> Breaker:
    """Manual reset to CLOSED (the record and its history are kept)."""
    if await store.get(breaker_key(name)) is None:
        return Breaker()  # nothing to reset
    now = store.clock()
    change = await _apply(store, name, lambda b: (b.reset(now), None))
    assert change.after is not None
    return change.after


async def breaker_list(*, store: StateStore) -> dict[str, Breaker]:
    """Every breaker with a record, by provider."""
    records = await store.scan(BREAKER_PREFIX)
    found = {key[len(BREAKER_PREFIX) :]: _decode(raw) for key, raw in records.items()}
    return {name: breaker for name, breaker in found.items() if breaker is not None}


async def breaker_forget(*, store: StateStore, name: str) -> None:
    """Drop the breaker's record and its row: it starts afresh, closed, at its next use."""
    await store.delete(breaker_key(name))
    persist_breaker_deleted(name)


async def breaker_reset_all(*, store: StateStore, forget: bool = False) -> int:
    """Reset every breaker; with ``forget`` also delete records and rows. Returns the count."""
    names = list(await breaker_list(store=store))
    for name in names:
        if forget:
            await breaker_forget(store=store, name=name)
        else:
            await breaker_reset(store=store, name=name)
    return len(names)


def _idle(breaker: Breaker, now: float) -> bool:
    quiet = breaker.last_failure_at is None or now - breaker.last_failure_at >= IDLE_SWEEP_SECONDS
    return breaker.is_pristine and quiet


async def breaker_sweep(*, store: StateStore) -> list[str]:
    """Drop idle CLOSED zero-failure breakers, and enforce the registry cap."""
    now = store.clock()
    breakers = await breaker_list(store=store)
    doomed = [name for name, b in breakers.items() if _idle(b, now)]
    excess = len(breakers) - len(doomed) - REGISTRY_CAP
    if excess > 0:
        doomed += _evictable(breakers, set(doomed))[:excess]
    dropped = []
    for name in doomed:
        if await _drop_if_still(store, name, lambda b: _idle(b, now) or b.is_pristine):
            persist_breaker_deleted(name)
            dropped.append(name)
    return dropped


async def _drop_if_still(
    store: StateStore, name: str, condition: Callable[[Breaker], bool]
) -> bool:
    """Delete the record only if it still meets ``condition``: a failure recorded since the
    scan (by any process) keeps it."""
    dropped = False

    def updater(raw: Json | None) -> Json | None:
        nonlocal dropped
        breaker = _decode(raw)
        dropped = breaker is not None and condition(breaker)
        return None if dropped else raw

    await store.update(breaker_key(name), updater)
    return dropped


def _evictable(breakers: dict[str, Breaker], skip: set[str]) -> list[str]:
    """CLOSED zero-failure breakers, oldest last failure first; never open or degraded ones."""
    closed = [
        (b.last_failure_at or 0.0, n)
        for n, b in breakers.items()
        if n not in skip and b.is_pristine
    ]
    return [name for _, name in sorted(closed)]


async def breaker_restore(
    *, store: StateStore, rows: dict[str, dict[str, Any]], overwrite: bool = False
) -> int:
    """Load persisted breakers into the store where it has none (cold start), or over what it
    has (``overwrite``: after a store outage the database, written throughout, wins). Returns
    how many records were written."""
    restored = 0
    for name, data in rows.items():
        loaded = False

        def updater(raw: Json | None, data: dict[str, Any] = data) -> Json | None:
            nonlocal loaded
            loaded = raw is None or overwrite
            return Breaker.from_dict(data).to_dict() if loaded else raw

        await store.update(breaker_key(name), updater)
        restored += loaded
    return restored
