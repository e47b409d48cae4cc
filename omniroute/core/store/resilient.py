"""``ResilientStore``: a state store that never fails a request because its server is away.

It wraps a shared *primary* (``RedisStore``) and a process-local *fallback* (``MemoryStore`` on
the same clock).  Every primary call is bounded by ``timeout`` seconds of a running event
loop: when the loop itself was paused past the timeout (the process stopped or starved of CPU),
the answer may be waiting unread, and the primary gets one more ``timeout``.  When the primary
does not answer in time or the connection fails (server down, restarting, unreachable, too slow):

* that call is answered by the fallback, and the store becomes **degraded**;
* for ``retry_interval`` seconds every call goes straight to the fallback, without touching the
  primary, and one warning is logged per interval (not one per call);
* after the interval one call asks the primary whether it answers again (a read of a key
  nobody writes).  When it does, the store **recovers**: the fallback is emptied (its state was
  process-local, partial and short-lived) and the ``on_recovered`` callbacks run, so durable
  state is reloaded from the database; then the call itself is served by the primary.

The callbacks also run when the primary reports that its server restarted empty while the
store was using it (``StoreRestartedError``: ``RedisStore`` checks each new connection, so a
restart between two calls is noticed by the next one), and the refused call is then retried.
Either way no call is served by the primary while they run: calls of this event loop wait for
them (a call on another loop runs them there too), except the callbacks' own calls
(``RESTORING``).  A healthy store pays one attribute check per call for this.

While degraded each process has its own state, which starts empty at each outage: counters,
windows, breakers and semaphores are per process, so caps are per process too.  A primary call
that timed out is cancelled in the background (the caller never waits for its clean-up); it may
still have been applied, which the contract allows (an ``update`` function may run more than
once).

Programming and contract errors (``TypeError``, ``ValueError``, ``StoreConflictError``, Redis
``ResponseError`` other than a read-only replica's) are not outages: they propagate exactly as
without the wrapper.  (The state store never fails a request.)
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MasterDownError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .base import RESTORING, Clock, Json, StateStore, StoreRestartedError, Updater
from .memory import MemoryStore
from .redis import RedisStore

T = TypeVar("T")
RecoveryCallback = Callable[[], Awaitable[object]]

DEFAULT_RETRY_INTERVAL_SECONDS = 1.0
PROBE_KEY = "store:probe"  # never written: read to learn whether the primary answers again
LATE_FRACTION = 0.5  # a timeout firing later than this (of itself) found the loop paused
RESTART_ATTEMPTS = 3  # a call refused by more restarts in a row is served locally
UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,  # refused, reset, closed; also "still loading its data"
    RedisTimeoutError,
    ReadOnlyError,  # a replica during a fail-over refuses writes
    MasterDownError,
    OSError,  # includes TimeoutError (asyncio's, and ours below) and socket errors
)
"""Errors meaning "the primary is not answering", as opposed to a bug or a contract error."""

logger = logging.getLogger(__name__)


class StoreTimeoutError(TimeoutError):
    """The primary did not answer within the store timeout."""


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _forget(task: asyncio.Task[object], *, name: str, started: float) -> None:
    # Fetch the outcome of an abandoned call, so asyncio does not log it as never retrieved.
    outcome = "cancelled" if task.cancelled() else repr(task.exception() or "answered")
    logger.debug(
        "abandoned %s call ended after %.0f ms: %s",
        name,
        (time.monotonic() - started) * 1000,
        outcome,
    )


class ResilientStore(StateStore):
    """``StateStore`` over a primary, served from a local fallback while the primary is away."""

    def __init__(
        self,
        primary: StateStore,
        *,
        timeout: float,
        retry_interval: float = DEFAULT_RETRY_INTERVAL_SECONDS,
        monotonic: Clock = time.monotonic,
        fallback: StateStore | None = None,
    ) -> None:
        if not timeout > 0 or not retry_interval > 0:
            raise ValueError("timeout and retry_interval must be positive")
        self.primary = primary
        self.clock = primary.clock
        self.fallback = fallback if fallback is not None else MemoryStore(clock=primary.clock)
        self.timeout = timeout
        self.retry_interval = retry_interval
        self._monotonic = monotonic
        self._lock = threading.Lock()  # the store is shared by several threads' event loops
        self._callbacks: list[RecoveryCallback] = []
        self._abandoned: set[asyncio.Task[object]] = set()
        self._since: float | None = None
        self._reason: str | None = None
        self._retry_at = -math.inf
        self._warned_at = -math.inf
        self._reconciles: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
        self._accepts: list[Callable[[], None]] = []
        self._rerun: set[asyncio.AbstractEventLoop] = set()
        if isinstance(primary, RedisStore):
            primary.refuse_restarted()

    # -- health --------------------------------------------------------------------------

    @property
    def degraded(self) -> bool:
        """Whether calls are being served by the process-local fallback."""
        return self._since is not None

    @property
    def degraded_reason(self) -> str | None:
        """The last primary failure while degraded (``None`` when healthy)."""
        return self._reason

    @property
    def degraded_since(self) -> float | None:
        """When (``clock`` time) the store became degraded; ``None`` when healthy."""
        return self._since

    def on_recovered(self, callback: RecoveryCallback) -> None:
        """Run ``callback`` (awaited, errors logged) each time the primary answers again after
        an outage or its server restarted, before the primary serves any other call."""
        if callback not in self._callbacks:
            self._callbacks.append(callback)

    # -- routing of calls ----------------------------------------------------------------

    def _take_turn(self) -> tuple[bool, bool]:
        """Whether this call may use the primary, and whether it is the probe of an outage."""
        if self._since is None:
            return True, False
        with self._lock:
            now = self._monotonic()
            if self._since is None or now < self._retry_at:
                return self._since is None, False
            self._retry_at = now + self.retry_interval  # this call is the one probe
            return True, True

    async def _call(self, name: str, op: Callable[[StateStore], Awaitable[T]]) -> T:
        use_primary, probe = self._take_turn()
        if not use_primary:
            return await op(self.fallback)
        if probe and not await self._probe():
            return await op(self.fallback)
        if self._reconciles and not RESTORING.get():
            await self._reconciled()
        attempts = RESTART_ATTEMPTS
        while True:
            try:
                return await self._bounded(name, op(self.primary))
            except StoreRestartedError as restart:
                attempts -= 1
                if not attempts:
                    await self._degrade(restart)
                    return await op(self.fallback)
                await self._reconciled(restart)
            except UNAVAILABLE as error:
                await self._degrade(error)
                return await op(self.fallback)

    async def _probe(self) -> bool:
        """Whether the primary answers again (then the store has recovered) or not (degraded
        for one more interval)."""
        try:
            await self._bounded("probe", self.primary.get(PROBE_KEY))
        except StoreRestartedError as restart:
            await self._recover(restart)
        except UNAVAILABLE as error:
            await self._degrade(error)
            return False
        else:
            await self._recover()
        return True

    async def _bounded(self, name: str, work: Awaitable[T]) -> T:
        """Await ``work`` for at most ``timeout``; past it, cancel it without waiting for it.

        The primary's clean-up of a cancelled call (closing a socket to a dead server) may
        itself take a while; it finishes in the background instead of holding the caller.
        """
        task, started = asyncio.ensure_future(work), time.monotonic()
        try:
            done, _ = await asyncio.wait((task,), timeout=self.timeout)
            if not done and self._loop_was_late(started):
                # This process did not run for a while (stopped, starved of CPU, blocked by a
                # long call): the answer may be waiting unread, so the primary gets one more
                # ``timeout`` of a loop that listens before it is called unreachable.
                done, _ = await asyncio.wait((task,), timeout=self.timeout)
        except BaseException:
            self._abandon(task, name, started)
            raise
        if not done:
            self._abandon(task, name, started)
            raise StoreTimeoutError(f"{name}: no answer within {self.timeout * 1000:g} ms")
        return task.result()

    def _loop_was_late(self, started: float) -> bool:
        """Whether the timeout fired late by more than ``LATE_FRACTION`` of itself: then the
        event loop, not the primary, is what did not answer in time."""
        return time.monotonic() - started > self.timeout * (1 + LATE_FRACTION)

    def _abandon(self, task: asyncio.Task[T], name: str, started: float) -> None:
        task.cancel()
        held: asyncio.Task[object] = task
        self._abandoned.add(held)  # the loop keeps only weak references to tasks
        held.add_done_callback(self._abandoned.discard)
        held.add_done_callback(partial(_forget, name=name, started=started))

    async def _degrade(self, error: BaseException) -> None:
        now, reason = self._monotonic(), _describe(error)
        with self._lock:
            entering = self._since is None
            if entering:
                self._since = self.clock()
            self._reason = reason
            self._retry_at = now + self.retry_interval
            warn = now - self._warned_at >= self.retry_interval
            if warn:
                self._warned_at = now
        if entering:
            # Start the outage from nothing: leftovers of an earlier one are stale.
            await self.fallback.clear_prefix("")
        if warn:
            logger.warning(
                "state store unreachable (%s); serving from process-local state, retrying in %g s",
                reason,
                self.retry_interval,
            )

    async def _recover(self, restart: StoreRestartedError | None = None) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            since, self._since, self._reason = self._since, None, None
            # Under the same lock: a call that sees the store healthy waits for the callbacks.
            reconcile = self._start_reconcile(loop, restart) if since is not None else None
        if since is not None:
            logger.info(
                "state store reachable again after %.1f s; dropping process-local state",
                max(self.clock() - since, 0.0),
            )
            await self.fallback.clear_prefix("")
        if reconcile is None:
            if restart is not None:
                await self._reconciled(restart)
        elif reconcile is not asyncio.current_task():
            await asyncio.shield(reconcile)

    # -- reconciling durable state -------------------------------------------------------

    def _start_reconcile(
        self, loop: asyncio.AbstractEventLoop, restart: StoreRestartedError | None
    ) -> asyncio.Task[None]:
        """This loop's running reconcile, else a new one (called with ``_lock`` held)."""
        if restart is not None:
            self._accepts.append(restart.accept)
        task = self._reconciles.get(loop)
        if task is None:
            if restart is not None:
                logger.warning(
                    "state store restarted (%s); restoring durable state before serving from it",
                    _describe(restart),
                )
            task = self._reconciles[loop] = loop.create_task(self._reconcile(loop))
        elif task is asyncio.current_task():  # the callbacks' own call found the store back
            self._rerun.add(loop)  # after an outage that began under them: once more
        return task

    async def _reconciled(self, restart: StoreRestartedError | None = None) -> None:
        """Return once durable state is back in the primary: join this loop's reconcile, or
        start one after a ``restart`` or while one runs on another loop only."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._reconciles = {lp: t for lp, t in self._reconciles.items() if not lp.is_closed()}
            if restart is None and not self._reconciles:
                return
            task = self._start_reconcile(loop, restart)
        if task is not asyncio.current_task():
            await asyncio.shield(task)

    async def _reconcile(self, loop: asyncio.AbstractEventLoop) -> None:
        RESTORING.set(True)  # in this task's own context: its calls reach a restarted primary
        try:
            again = True
            while again:
                with self._lock:
                    self._rerun.discard(loop)
                for callback in list(self._callbacks):
                    try:
                        await callback()
                    except Exception:
                        logger.exception("state store recovery callback %r failed", callback)
                with self._lock:
                    again = loop in self._rerun
        finally:
            with self._lock:
                accepts, self._accepts = self._accepts, []
                if self._reconciles.get(loop) is asyncio.current_task():
                    del self._reconciles[loop]
            for accept in accepts:
                accept()

    # -- records -------------------------------------------------------------------------

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        return await self._call("incr", lambda store: store.incr(key, amount, ttl=ttl))

    async def get_counter(self, key: str) -> int:
        return await self._call("get_counter", lambda store: store.get_counter(key))

    async def get(self, key: str) -> Json | None:
        return await self._call("get", lambda store: store.get(key))

    async def get_many(self, keys: Sequence[str]) -> list[Json | None]:
        return await self._call("get_many", lambda store: store.get_many(keys))

    async def set(self, key: str, value: Json, *, ttl: float | None = None) -> None:
        await self._call("set", lambda store: store.set(key, value, ttl=ttl))

    async def delete(self, key: str) -> bool:
        return await self._call("delete", lambda store: store.delete(key))

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> Json | None:
        return await self._call("update", lambda store: store.update(key, fn, ttl=ttl))

    async def scan(self, prefix: str) -> dict[str, Json]:
        return await self._call("scan", lambda store: store.scan(prefix))

    # -- sliding windows -----------------------------------------------------------------

    async def window_add(self, key: str, *, window: float, amount: int = 1) -> int:
        return await self._call(
            "window_add", lambda store: store.window_add(key, window=window, amount=amount)
        )

    async def window_count(self, key: str, *, window: float) -> int:
        return await self._call(
            "window_count", lambda store: store.window_count(key, window=window)
        )

    async def window_clear(self, key: str) -> None:
        await self._call("window_clear", lambda store: store.window_clear(key))

    # -- semaphores ----------------------------------------------------------------------

    async def semaphore_acquire(self, key: str, holder: str, *, limit: int, ttl: float) -> bool:
        return await self._call(
            "semaphore_acquire",
            lambda store: store.semaphore_acquire(key, holder, limit=limit, ttl=ttl),
        )

    async def semaphore_release(self, key: str, holder: str) -> bool:
        return await self._call(
            "semaphore_release", lambda store: store.semaphore_release(key, holder)
        )

    async def semaphore_refresh(self, key: str, holder: str, *, ttl: float) -> bool:
        return await self._call(
            "semaphore_refresh", lambda store: store.semaphore_refresh(key, holder, ttl=ttl)
        )

    async def semaphore_count(self, key: str) -> int:
        return await self._call("semaphore_count", lambda store: store.semaphore_count(key))

    # -- maintenance ---------------------------------------------------------------------

    async def clear_prefix(self, prefix: str) -> int:
        """Clear both stores: what the fallback holds must not come back at the next outage."""
        removed = await self._call("clear_prefix", lambda store: store.clear_prefix(prefix))
        await self.fallback.clear_prefix(prefix)
        return removed

    async def close(self) -> None:
        """Close the primary's connections (bounded: a dead server must not hold shutdown)."""
        try:
            await self._bounded("close", self.primary.close())
        except UNAVAILABLE as error:
            logger.info("state store close did not complete: %s", _describe(error))
        await self.fallback.close()
