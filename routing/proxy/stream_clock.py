"""The two limits on a committed stream's reads: the idle limit and the client's deadline.

After commit a stream is idle while it sends nothing that changes the answer: comments, pings,
empty deltas and block boundaries keep bytes flowing but do not count (the transport's read
timeout, which they reset, cannot see that). :class:`StreamClock` counts the time spent
waiting for the upstream since the last event that changed the answer (:meth:`answered`);
time spent handing events to a client that reads slowly is not the upstream's silence and
does not count. The client's deadline (``X-OmniRoute-Deadline-Ms``, ``deadline_at``) counts
all the time, wherever it is spent.

One timer per stream, moved only when it would fire too late: a read that outlives its limit
is cancelled (and told apart from a client that leaves, whose cancellation goes on), and a read
that starts past its limit does not start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

__all__ = ["ClientDeadline", "IdleLimit", "StreamClock"]


class IdleLimit(Exception):
    """The stream sent nothing that changed the answer within the idle limit."""


class ClientDeadline(Exception):
    """The deadline the client set ran out while its stream was relayed."""


class StreamClock:
    """Bounds the reads of one stream after commit (see the module docstring)."""

    __slots__ = (
        "_expiry",
        "_fired",
        "_reader",
        "_spent",
        "_timer",
        "_timer_at",
        "deadline_at",
        "idle_seconds",
    )

    def __init__(self, idle_seconds: float | None = None) -> None:
        self.idle_seconds = idle_seconds
        self.deadline_at: float | None = None  # ``time.monotonic()``; the client's deadline
        self._spent = 0.0  # seconds waited for the upstream since the answer last changed
        self._expiry = 0.0  # when the current read runs out
        self._reader: asyncio.Task[object] | None = None  # the task in a read, if any
        self._fired = False  # the timer cancelled the current read
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def answered(self) -> None:
        """An event changed the answer: the idle limit starts again."""
        self._spent = 0.0

    async def read(self, chunks: AsyncIterator[bytes]) -> bytes:
        """The next chunk; :class:`IdleLimit` or :class:`ClientDeadline` when a limit runs out
        first (``StopAsyncIteration`` at the end, as ``anext``)."""
        started = time.monotonic()
        expiry = self._limit(started)
        if expiry is None:
            return await anext(chunks)
        if started >= expiry:
            raise self._expired(started)
        self._expiry = expiry
        if self._timer is None or self._timer_at > expiry:
            self._arm(expiry, started)
        task = asyncio.current_task()
        self._reader = task
        try:
            return await anext(chunks)
        except asyncio.CancelledError:
            if self._fired and task is not None and task.uncancel() == 0:  # ours alone
                raise self._expired(time.monotonic()) from None
            raise
        finally:
            self._reader, self._fired = None, False
            self._spent += time.monotonic() - started

    def stop(self) -> None:
        """The stream is over: its timer goes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _limit(self, now: float) -> float | None:
        idle = None if self.idle_seconds is None else now + self.idle_seconds - self._spent
        if self.deadline_at is None:
            return idle
        return self.deadline_at if idle is None else min(idle, self.deadline_at)

    def _expired(self, now: float) -> Exception:
        if self.deadline_at is not None and now >= self.deadline_at:
            return ClientDeadline()
        return IdleLimit()

    def _arm(self, at: float, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().call_later(at - now, self._ring)

    def _ring(self) -> None:
        self._timer = None
        reader = self._reader
        if reader is None:  # between reads: the next read looks at the time itself
            return
        now = time.monotonic()
        if now < self._expiry:  # armed for an earlier read's limit
            self._arm(self._expiry, now)
            return
        self._fired = True
        reader.cancel()
