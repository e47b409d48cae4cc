"""Account semaphores: several gates acquired at once, FIFO.

A request names its gates (``key``, ``cap``) and is admitted when, on every gate, it is at the
head of the queue, the gate is not blocked and the state store grants a slot (the store's
semaphores are the cap across processes; a slot expires after :data:`HOLD_TTL_SECONDS`, so a
crashed holder cannot leak it for ever). Waiting holds no capacity. A full queue refuses at
once (``SEMAPHORE_QUEUE_FULL``), a wait past its timeout gives up (``SEMAPHORE_TIMEOUT``), and
a waiter cancelled (the client left) leaves every queue it was in. Releasing is idempotent and
wakes the next waiter of each gate.

Within one process the queue order is exact; between processes a waiter whose gate is full
elsewhere retries every :data:`POLL_SECONDS` (there is no cross-process wake-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from omniroute.core.store import StateStore

HOLD_TTL_SECONDS = 900.0  # a leaked slot frees itself after this
POLL_SECONDS = 0.05
QUEUE_FULL = "SEMAPHORE_QUEUE_FULL"
TIMED_OUT = "SEMAPHORE_TIMEOUT"
_PREFIX = "gate:"

Requirement = tuple[str, int | None]  # gate key, cap (None or <= 0: no cap)


class GateRefused(Exception):
    """The gates did not admit the request: ``code`` is ``SEMAPHORE_QUEUE_FULL`` or
    ``SEMAPHORE_TIMEOUT``."""

    def __init__(self, code: str, key: str, message: str) -> None:
        super().__init__(message)
        self.code, self.key, self.message = code, key, message


@dataclass(eq=False)
class _Waiter:
    caps: dict[str, int]
    woken: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Gate:
    cap: int = 0
    running: int = 0
    queue: deque[_Waiter] = field(default_factory=deque)
    blocked_until: float = 0.0


@dataclass(frozen=True, slots=True)
class GateStats:
    running: int
    queued: int
    cap: int
    blocked_until: float | None


class Hold:
    """Slots held on some gates; ``release`` is idempotent. (A gate bounds no execution time:
    ``execution_seconds`` is for the attempt loop's holder protocol.)"""

    execution_seconds: float | None = None

    def __init__(self, gates: Gates | None, caps: dict[str, int], holder: str) -> None:
        self._gates, self._caps, self._holder = gates, caps, holder

    async def release(self) -> None:
        gates, self._gates = self._gates, None
        if gates is not None:
            await gates._release(self._caps, self._holder)


NO_HOLD = Hold(None, {}, "")


def requirements(items: Iterable[Requirement]) -> dict[str, int]:
    """The gates that apply: caps that are positive, the smallest of a key given twice."""
    caps: dict[str, int] = {}
    for key, cap in items:
        if cap is not None and cap > 0:
            caps[key] = min(cap, caps.get(key, cap))
    return caps


class Gates:
    """The gates of one process over one state store."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._gates: dict[str, _Gate] = {}

    async def acquire(
        self,
        items: Sequence[Requirement],
        *,
        holder: str,
        wait_seconds: float,
        max_queue: int,
    ) -> Hold:
        """Admit the request on every gate of ``items`` or raise :class:`GateRefused`."""
        caps = requirements(items)
        if not caps:
            return NO_HOLD
        gates = {key: self._gate(key, cap) for key, cap in caps.items()}
        for key, gate in gates.items():
            if max_queue > 0 and len(gate.queue) >= max_queue:
                raise GateRefused(QUEUE_FULL, key, f"The queue of gate {key} is full.")
        if all(not g.queue for g in gates.values()) and await self._take(caps, holder):
            return Hold(self, caps, holder)
        waiter = _Waiter(caps)
        for gate in gates.values():
            gate.queue.append(waiter)
        taken = False
        try:
            async with asyncio.timeout(wait_seconds):
                while True:
                    if self._at_head(waiter) and await self._take(caps, holder):
                        taken = True
                        return Hold(self, caps, holder)
                    waiter.woken.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(POLL_SECONDS):
                            await waiter.woken.wait()
        except TimeoutError:
            key = next(iter(caps))
            raise GateRefused(
                TIMED_OUT, key, f"No slot of gate {key} within {wait_seconds:g} s."
            ) from None
        finally:
            for key in caps:
                gate = self._gates[key]
                with contextlib.suppress(ValueError):
                    gate.queue.remove(waiter)
                if not taken:
                    self._wake(key)
            if not taken:
                self._collect(caps)

    def stats(self) -> dict[str, GateStats]:
        now = self.clock()
        return {
            key: GateStats(
                g.running, len(g.queue), g.cap, g.blocked_until if g.blocked_until > now else None
            )
            for key, g in self._gates.items()
        }

    def block(self, key: str, until: float) -> None:
        """Admit nobody on ``key`` until ``until`` (this process's clock)."""
        self._gate(key, 0).blocked_until = until

    def unblock(self, key: str) -> None:
        gate = self._gates.get(key)
        if gate is not None:
            gate.blocked_until = 0.0
            self._wake(key)

    def _gate(self, key: str, cap: int) -> _Gate:
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = _Gate(cap)
        elif cap:
            gate.cap = cap
        return gate

    def _at_head(self, waiter: _Waiter) -> bool:
        return all(self._gates[key].queue[0] is waiter for key in waiter.caps)

    async def _take(self, caps: dict[str, int], holder: str) -> bool:
        """A slot on every gate, or none: the store's semaphores decide, across processes."""
        now = self.clock()
        for key, cap in caps.items():
            gate = self._gates[key]
            if gate.blocked_until > now or gate.running >= cap:
                return False
        taken: list[str] = []
        for key, cap in caps.items():
            if not await self.store.semaphore_acquire(
                _PREFIX + key, holder, limit=cap, ttl=HOLD_TTL_SECONDS
            ):
                for done in taken:
                    await self.store.semaphore_release(_PREFIX + done, holder)
                return False
            taken.append(key)
        for key in caps:
            self._gates[key].running += 1
        return True

    async def _release(self, caps: dict[str, int], holder: str) -> None:
        for key in caps:
            gate = self._gates[key]
            gate.running = max(0, gate.running - 1)
            self._wake(key)
        for key in caps:
            await self.store.semaphore_release(_PREFIX + key, holder)
        self._collect(caps)

    def _wake(self, key: str) -> None:
        gate = self._gates.get(key)
        if gate is not None and gate.queue:
            gate.queue[0].woken.set()

    def _collect(self, keys: Iterable[str]) -> None:
        """Forget idle gates."""
        for key in keys:
            gate = self._gates.get(key)
            if gate is not None and not gate.running and not gate.queue and not gate.blocked_until:
                del self._gates[key]
