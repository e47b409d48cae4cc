"""The local request queue of one provider connection (reference-part2 §5, decisions 10, 21).

A limiter starts its queued requests in order, each when it may: fewer than
``max_concurrent`` running, at least ``min_time`` since the last start, and a request left in
the minute's reservoir (``per_minute``, refilled every 60 s). Admission is decided before a
request joins the queue (``routing.domain.admission``): past ``maxQueueDepth`` waiting
callers the next one is refused at once. A waiter that is cancelled (the client left) leaves
the queue. Per process, like the reference's limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

REFILL_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class LimiterPolicy:
    """One limiter's limits (0: unlimited)."""

    max_concurrent: int = 0
    min_time_seconds: float = 0.0
    per_minute: int = 0


@dataclass(eq=False)
class _Waiter:
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class LimiterHold:
    """A started request; ``release`` is idempotent. ``execution_seconds`` bounds the time from
    its dispatch to the upstream's response headers, when the caller sets one."""

    def __init__(self, limiter: Limiter, execution_seconds: float | None = None) -> None:
        self._limiter: Limiter | None = limiter
        self.execution_seconds = execution_seconds

    async def release(self) -> None:
        limiter, self._limiter = self._limiter, None
        if limiter is not None:
            limiter._finished()


class Limiter:
    """One provider connection's queue."""

    def __init__(self, policy: LimiterPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self.running = 0
        self._queue: deque[_Waiter] = deque()
        self._last_start = -math.inf
        self._reservoir = policy.per_minute
        self._refill_at = clock() + REFILL_SECONDS

    @property
    def queued(self) -> int:
        return len(self._queue)

    def update(self, policy: LimiterPolicy) -> None:
        """New limits from the settings; a waiter may start at once."""
        if policy != self.policy:
            if policy.per_minute != self.policy.per_minute:
                self._reservoir = min(self._reservoir, policy.per_minute) or policy.per_minute
            self.policy = policy
            self._wake()

    async def schedule(self, execution_seconds: float | None = None) -> LimiterHold:
        """Wait for this request's turn, then start it."""
        waiter = _Waiter()
        self._queue.append(waiter)
        started = False
        try:
            while True:
                delay = self._delay(waiter)
                if delay == 0:
                    self._start()
                    started = True
                    return LimiterHold(self, execution_seconds)
                waiter.woken.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if math.isinf(delay) else delay):
                        await waiter.woken.wait()
        finally:
            if not started:
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiter)
                self._wake()

    def _delay(self, waiter: _Waiter) -> float:
        """Seconds until ``waiter`` may start: 0 now, ``inf`` until something is released."""
        if self._queue[0] is not waiter:
            return math.inf
        policy, now = self.policy, self.clock()
        if policy.max_concurrent and self.running >= policy.max_concurrent:
            return math.inf
        if policy.per_minute:
            if now >= self._refill_at:
                self._reservoir, self._refill_at = policy.per_minute, now + REFILL_SECONDS
            if self._reservoir <= 0:
                return self._refill_at - now
        return max(0.0, self._last_start + policy.min_time_seconds - now)

    def _start(self) -> None:
        self._queue.popleft()
        self.running += 1
        self._last_start = self.clock()
        if self.policy.per_minute:
            self._reservoir -= 1
        self._wake()

    def _finished(self) -> None:
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
