"""The request queue of one provider connection.

A limiter starts its queued requests in order, each when it may: fewer than
``max_concurrent`` running, at least ``min_time`` since the last start, and fewer than
``per_minute`` starts in the last 60 s (a sliding window: ``routing.domain.attempts.start_log``).
Admission is decided before a request joins the queue (``routing.domain.attempts.admission``):
past ``maxQueueDepth`` waiting callers the next one is refused at once. A waiter that is
cancelled (the client left) leaves the queue.

The queue and its order are per process; the limits hold across processes through the state
store (per process only while the store is degraded): only the head waiter asks it, and only
for a connection with limits. The starts and their spacing are one record, the start log,
changed atomically (``StateStore.update``); the running requests are a store semaphore whose
slots expire after :data:`HOLD_TTL_SECONDS` unless refreshed every :data:`REFRESH_SECONDS`
while they run, so a dead process's slots come back. When the store says "not yet" the head
waits until the time it computed, or, for a slot held by another process, asks again every
:data:`POLL_SECONDS` (there is no cross-process wake-up); a release in this process wakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import cast

from omniroute.core.store import Json, StateStore, StoreConflictError
from routing.domain.attempts.start_log import StartDecision, decide, record_ttl

HOLD_TTL_SECONDS = 30.0
REFRESH_SECONDS = 10.0
POLL_SECONDS = 0.1
_PREFIX = "queue:"

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LimiterPolicy:
    """One limiter's limits (0: unlimited)."""

    max_concurrent: int = 0
    min_time_seconds: float = 0.0
    per_minute: int = 0


@dataclass(eq=False)
class _Waiter:
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class LimiterHold:
    """A started request; ``release`` is idempotent. ``execution_seconds`` bounds the time from
    its dispatch to the upstream's response headers, when the caller sets one."""

    def __init__(
        self,
        limiter: Limiter,
        holder: str,
        slot: bool,
        execution_seconds: float | None = None,
    ) -> None:
        self._limiter: Limiter | None = limiter
        self._holder, self._slot = holder, slot
        self.execution_seconds = execution_seconds

    async def release(self) -> None:
        limiter, self._limiter = self._limiter, None
        if limiter is not None:
            await limiter._finished(self._holder, self._slot)


class Limiter:
    """One provider connection's queue in this process, over the shared ``store``."""

    def __init__(self, policy: LimiterPolicy, store: StateStore, *, key: str = "local") -> None:
        self.policy = policy
        self.store = store
        self.running = 0
        self._slots_key = f"{_PREFIX}{key}"
        self._log_key = f"{_PREFIX}{key}:starts"
        self._queue: deque[_Waiter] = deque()
        self._slots: set[str] = set()
        self._refresher: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def update(self, policy: LimiterPolicy) -> None:
        """New limits from the settings; a waiter may start at once."""
        if policy != self.policy:
            self.policy = policy
            self._wake()

    async def schedule(self, execution_seconds: float | None = None) -> LimiterHold:
        """Wait for this request's turn, then start it."""
        waiter = _Waiter()
        self._queue.append(waiter)
        started = False
        try:
            while True:
                slot = bool(self.policy.max_concurrent)
                delay = await self._try_start(waiter)
                if delay == 0:
                    self._queue.popleft()
                    self.running += 1
                    started = True
                    if slot:
                        self._hold_slot(waiter.holder)
                    self._wake()
                    return LimiterHold(self, waiter.holder, slot, execution_seconds)
                waiter.woken.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if math.isinf(delay) else delay):
                        await waiter.woken.wait()
        finally:
            if not started:
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiter)
                self._wake()

    async def _try_start(self, waiter: _Waiter) -> float:
        """Start ``waiter`` if it may (0), else the seconds until it should look again (``inf``:
        until something in this process wakes it)."""
        if self._queue[0] is not waiter:
            return math.inf
        policy = self.policy
        if policy.max_concurrent and self.running >= policy.max_concurrent:
            return math.inf
        if policy.max_concurrent and not await self.store.semaphore_acquire(
            self._slots_key, waiter.holder, limit=policy.max_concurrent, ttl=HOLD_TTL_SECONDS
        ):
            return POLL_SECONDS  # full through another process
        wait = POLL_SECONDS
        try:
            wait = await self._record_start(policy)
        finally:
            if wait and policy.max_concurrent:  # not started (or cancelled): hold nothing
                await self.store.semaphore_release(self._slots_key, waiter.holder)
        return wait

    async def _record_start(self, policy: LimiterPolicy) -> float:
        """Add a start to the shared start log if the rate and the spacing allow it (0), else
        the seconds until they may."""
        if not policy.per_minute and not policy.min_time_seconds:
            return 0.0
        now = self.store.clock()
        decisions: list[StartDecision] = []

        def start(current: Json | None) -> Json | None:
            decision = decide(
                current,
                now,
                per_minute=policy.per_minute,
                min_time_seconds=policy.min_time_seconds,
            )
            decisions.append(decision)
            return cast(Json, decision.log) or None

        try:
            stored = await self.store.update(
                self._log_key,
                start,
                ttl=record_ttl(policy.min_time_seconds),
            )
        except StoreConflictError:
            return POLL_SECONDS
        # ``start`` may have run more than once: the decision is the one that was stored.
        for decision in reversed(decisions):
            if decision.log == (stored or []):
                return decision.wait
        return POLL_SECONDS

    def _hold_slot(self, holder: str) -> None:
        self._slots.add(holder)
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._keep_slots())

    async def _keep_slots(self) -> None:
        while self._slots:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh_slots()
            except Exception:
                logger.warning("could not refresh the request queue's slots", exc_info=True)

    async def refresh_slots(self) -> None:
        """Extend the store slots of this process's running requests."""
        for holder in list(self._slots):
            await self.store.semaphore_refresh(self._slots_key, holder, ttl=HOLD_TTL_SECONDS)

    async def _finished(self, holder: str, slot: bool) -> None:
        try:
            if slot:
                self._slots.discard(holder)
                await self.store.semaphore_release(self._slots_key, holder)
        finally:
            self.running = max(0, self.running - 1)
            self._wake()

    def _wake(self) -> None:
        if self._queue:
            self._queue[0].woken.set()

    def poke(self) -> None:
        """Have the first waiter look again (its clock moved: tests)."""
        self._wake()

    @property
    def idle(self) -> bool:
        return not self.running and not self._queue
