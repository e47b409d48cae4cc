"""Redis ``StateStore`` backend (``redis.asyncio``), shared by every process using it.

Atomicity: every operation is a single atomic step on the Redis server, so it is atomic with
respect to all clients of all processes using the same server and prefix:

* reads (``get``, ``get_counter``, ``window_count``, ``semaphore_count``) are one command;
* ``set`` is one MULTI/EXEC transaction;
* counters, ``delete``, ``window_add`` and the semaphore operations are Lua scripts (a script
  runs without interleaving with any other command);
* ``update`` is optimistic: WATCH the record, read it, call ``fn`` in Python, then write in
  MULTI/EXEC; if anyone touched the record in between, EXEC fails (``WatchError``) and the
  whole read-call-write is retried with jittered backoff, up to ``max_update_retries`` times
  before ``StoreConflictError``.  No update is ever lost.  Within one event loop, updates of
  the same key are also queued on a local ``asyncio.Lock`` so that only updates from
  *different* processes/loops race for WATCH.
* ``scan`` and ``clear_prefix`` walk keys with SCAN: each key is handled atomically but the
  whole walk is not a snapshot.

Expiry is logical: ``now`` comes from the injected clock and is passed to Lua scripts as an
argument, expiry timestamps are stored next to values (or as sorted-set scores), so a fake
clock drives expiry exactly as in ``MemoryStore``.  Independently, every key that can expire
gets a physical ``PEXPIRE`` backstop of ``ttl + 60`` real seconds so Redis frees it.

Key layout (everything starts with ``prefix``):

* ``{prefix}r:{key}`` hash: ``v`` = JSON value, ``e`` = expiry timestamp (absent: never);
* ``{prefix}w:{key}`` sorted set: member ``{uuid}:{amount}``, score = event time;
* ``{prefix}s:{key}`` sorted set: member = holder, score = holder's expiry time.

A ``redis.asyncio`` client is bound to the event loop that first used it, so the store keeps
one client (with its own blocking connection pool) per running loop, created lazily.  Call
``close()`` from each loop that used the store before that loop ends.

Connections: a pooled connection that went stale (the server restarted or closed it) fails
with ``ConnectionError`` on its next use; the command is then retried once on a fresh
connection, so the first call after a restart succeeds.  Timeouts are not retried.  Socket
timeouts are short (``socket_timeout``, 2 s): every command here is small, and a caller that
needs a tighter bound (``ResilientStore``) cancels the call, which drops its connection rather
than returning it to the pool with an unread reply.

Restarts: each new connection asks the server its ``run_id`` (``INFO server``; one round trip
per connection, none per command).  A server whose ``run_id`` is not the one the store first
met is a restarted one, empty unless it persists its data.  After ``refuse_restarted()`` a new
connection to it is refused: the call that opened it raises ``RedisRestartedError`` (nothing of
the call is sent), until the error's ``accept()``.  A connection opened under ``RESTORING``
(putting durable state back) is let through and then pooled like any other, so until it
accepts, the owner keeps its other calls away from the store (``ResilientStore`` does).
Without ``refuse_restarted()``, as for a plain client, the restarted server serves the call.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError, WatchError
from redis.typing import EncodableT, FieldT

from ._shared import as_counter, check_window_args, decode, encode
from .base import (
    RESTORING,
    Clock,
    Json,
    StateStore,
    StoreConflictError,
    StoreRestartedError,
    Updater,
)
from .redis_scripts import SCRIPTS

RECORD, WINDOW, SEMAPHORE = "r:", "w:", "s:"
BACKSTOP_SECONDS = 60.0
SCAN_COUNT = 500
POOL_WAIT_SECONDS = 5.0  # how long a call waits for a free pooled connection


def _num(value: float) -> str:
    """Exact decimal form of a float for Redis scores and Lua ``tonumber``."""
    return repr(float(value))


def _backstop_ms(seconds: float) -> int:
    return math.ceil((max(seconds, 0.0) + BACKSTOP_SECONDS) * 1000)


def _run_id(info: object) -> str | None:
    text = info.decode() if isinstance(info, bytes) else str(info)
    found = re.search(r"^run_id:(\w+)", text, re.MULTILINE)
    return found.group(1) if found else None


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _decode_live(raw: bytes | str | None, expires: bytes | str | None, now: float) -> Json | None:
    if raw is None or (expires is not None and float(expires) <= now):
        return None
    return decode(raw)


def _queue_write(
    pipe: Pipeline, rkey: str, raw: bytes | None, now: float, ttl: float | None
) -> None:
    """Queue (inside MULTI) the replacement of record ``rkey`` by ``raw`` (None: delete)."""
    pipe.delete(rkey)
    if raw is None:
        return
    mapping: dict[FieldT, EncodableT] = {"v": raw}
    if ttl is not None:
        mapping["e"] = _num(now + ttl)
    pipe.hset(rkey, mapping=mapping)
    if ttl is not None:
        pipe.pexpire(rkey, _backstop_ms(ttl))


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(random.uniform(0.0, min(0.05, 0.0005 * 2**attempt)))


class RedisRestartedError(RedisError, StoreRestartedError):
    """A new connection reached a restarted Redis (another ``run_id``); nothing was sent."""

    def __init__(self, store: RedisStore, run_id: str) -> None:
        super().__init__(f"Redis restarted (run_id {run_id}): its data is gone")
        self.store, self.run_id = store, run_id

    def accept(self) -> None:
        self.store._met_server(self.run_id)


@dataclass(slots=True)
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass(slots=True)
class _LoopClient:
    """The client, scripts and local update queues of one event loop."""

    client: Redis
    scripts: dict[str, AsyncScript]
    update_locks: dict[str, _KeyLock] = field(default_factory=dict)


class RedisStore(StateStore):
    """``StateStore`` in Redis, atomic across processes; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "omniroute:",
        clock: Clock = time.time,
        max_update_retries: int = 100,
        max_connections: int = 64,
        socket_timeout: float = 2.0,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.clock = clock
        self.max_update_retries = max_update_retries
        self.max_connections = max_connections
        self.socket_timeout = socket_timeout
        self._clients: dict[asyncio.AbstractEventLoop, _LoopClient] = {}
        self._clients_lock = threading.Lock()
        self._run_id: str | None = None  # the server this store's data lives on
        self._refuse_restarted = False

    # -- restarts ------------------------------------------------------------------------

    def refuse_restarted(self) -> None:
        """Refuse new connections to a restarted server (see the module docstring)."""
        self._refuse_restarted = True

    def _met_server(self, run_id: str) -> None:
        with self._clients_lock:
            self._run_id = run_id

    async def _handshake(self, connection: AbstractConnection) -> None:
        """Set a new connection up, then check which server it reached (on every connect)."""
        await connection.on_connect()
        await connection.send_command("INFO", "server")
        try:
            run_id = _run_id(await connection.read_response())
        except ResponseError:  # INFO refused (renamed away): restarts go unnoticed
            return
        if run_id is None:
            return
        with self._clients_lock:
            if self._run_id is None:
                self._run_id = run_id
            if run_id == self._run_id or not self._refuse_restarted or RESTORING.get():
                return
        raise RedisRestartedError(self, run_id)

    # -- clients -------------------------------------------------------------------------

    def _connect(self) -> _LoopClient:
        pool = BlockingConnectionPool.from_url(
            self.url,
            max_connections=self.max_connections,
            timeout=max(POOL_WAIT_SECONDS, self.socket_timeout * 2),
            socket_timeout=self.socket_timeout,
            socket_connect_timeout=self.socket_timeout,
            # A stale pooled connection (server restarted) is dropped and the command retried
            # once on a new one; a timeout is not retried (it would only double the wait).
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            redis_connect_func=self._handshake,
        )
        client = Redis.from_pool(pool)
        scripts = {name: client.register_script(src) for name, src in SCRIPTS.items()}
        return _LoopClient(client, scripts)

    def _loop_client(self) -> _LoopClient:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            entry = self._clients.get(loop)
            if entry is None:
                self._clients = {lp: c for lp, c in self._clients.items() if not lp.is_closed()}
                entry = self._clients[loop] = self._connect()
            return entry

    def _client(self) -> Redis:
        return self._loop_client().client

    async def _script(self, name: str, key: str, *args: str | int) -> int:
        entry = self._loop_client()
        return int(await entry.scripts[name](keys=[key], args=args, client=entry.client))

    async def close(self) -> None:
        """Close this loop's client (clients of already-closed loops are just dropped)."""
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            entry = self._clients.pop(loop, None)
            self._clients = {lp: c for lp, c in self._clients.items() if not lp.is_closed()}
        if entry is not None:
            await entry.client.aclose()

    # -- keys ----------------------------------------------------------------------------

    def _key(self, namespace: str, key: str) -> str:
        return f"{self.prefix}{namespace}{key}"

    def _unkey(self, namespace: str, raw: bytes) -> str:
        return raw.decode()[len(self.prefix) + len(namespace) :]

    async def _scan_batches(self, namespace: str, prefix: str) -> AsyncIterator[list[bytes]]:
        """Yield batches of full keys of ``namespace`` starting with ``prefix`` (SCAN)."""
        client, cursor = self._client(), 0
        pattern = _glob_escape(self._key(namespace, prefix)) + "*"
        while True:
            cursor, keys = await client.scan(cursor, match=pattern, count=SCAN_COUNT)
            if keys:
                yield cast(list[bytes], keys)
            if cursor == 0:
                return

    # -- records -------------------------------------------------------------------------

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        now = self.clock()
        expires = "" if ttl is None else _num(now + ttl)
        args = (amount, _num(now), expires, _backstop_ms(ttl or 0.0))
        try:
            return await self._script("incr", self._key(RECORD, key), *args)
        except ResponseError as exc:
            if "not an integer" not in str(exc):
                raise
            raise TypeError(f"record {key!r} is not an integer counter") from exc

    async def get_counter(self, key: str) -> int:
        return as_counter(await self.get(key))

    async def get(self, key: str) -> Json | None:
        raw, expires = await self._client().hmget(self._key(RECORD, key), ["v", "e"])
        return _decode_live(raw, expires, self.clock())

    async def get_many(self, keys: Sequence[str]) -> list[Json | None]:
        async with self._client().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hmget(self._key(RECORD, key), ["v", "e"])
            replies = await pipe.execute()
        now = self.clock()
        return [_decode_live(raw, expires, now) for raw, expires in replies]

    async def set(self, key: str, value: Json, *, ttl: float | None = None) -> None:
        raw = None if value is None else encode(value)
        async with self._client().pipeline(transaction=True) as pipe:
            _queue_write(pipe, self._key(RECORD, key), raw, self.clock(), ttl)
            await pipe.execute()

    async def delete(self, key: str) -> bool:
        return bool(await self._script("delete", self._key(RECORD, key), _num(self.clock())))

    @asynccontextmanager
    async def _queued(self, key: str) -> AsyncIterator[None]:
        """Serialise this loop's updates of ``key`` so they do not fight over WATCH."""
        locks = self._loop_client().update_locks
        entry = locks.get(key) or locks.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del locks[key]

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> Json | None:
        async with self._queued(key):
            for attempt in range(self.max_update_retries + 1):
                try:
                    return await self._try_update(self._key(RECORD, key), fn, ttl)
                except WatchError:
                    await _backoff(attempt)
        raise StoreConflictError(
            f"update of {key!r} lost {self.max_update_retries + 1} races in a row"
        )

    async def _try_update(self, rkey: str, fn: Updater, ttl: float | None) -> Json | None:
        async with self._client().pipeline(transaction=True) as pipe:
            await pipe.watch(rkey)
            raw, expires = await pipe.hmget(rkey, ["v", "e"])
            now = self.clock()
            new = fn(_decode_live(raw, expires, now))
            new_raw = None if new is None else encode(new)
            pipe.multi()  # type: ignore[no-untyped-call]
            _queue_write(pipe, rkey, new_raw, now, ttl)
            await pipe.execute()
        return None if new_raw is None else decode(new_raw)

    async def scan(self, prefix: str) -> dict[str, Json]:
        found: dict[str, Json] = {}
        async for keys in self._scan_batches(RECORD, prefix):
            async with self._client().pipeline(transaction=False) as pipe:
                for rkey in keys:
                    pipe.hmget(rkey, ["v", "e"])
                rows = cast(list[list[bytes | None]], await pipe.execute())
            now = self.clock()
            for rkey, (raw, expires) in zip(keys, rows, strict=True):
                if (value := _decode_live(raw, expires, now)) is not None:
                    found[self._unkey(RECORD, rkey)] = value
        return found

    # -- sliding windows -----------------------------------------------------------------

    async def window_add(self, key: str, *, window: float, amount: int = 1) -> int:
        check_window_args(window, amount)
        now = self.clock()
        member = f"{uuid.uuid4().hex}:{amount}"
        args = (_num(now), _num(now - window), member, _backstop_ms(window))
        return await self._script("window_add", self._key(WINDOW, key), *args)

    async def window_count(self, key: str, *, window: float) -> int:
        check_window_args(window)
        cutoff = f"({_num(self.clock() - window)}"
        members = await self._client().zrangebyscore(self._key(WINDOW, key), cutoff, "+inf")
        return sum(int(m.rsplit(b":", 1)[1]) for m in cast(list[bytes], members))

    async def window_clear(self, key: str) -> None:
        await self._client().unlink(self._key(WINDOW, key))

    # -- semaphores ----------------------------------------------------------------------

    async def semaphore_acquire(self, key: str, holder: str, *, limit: int, ttl: float) -> bool:
        now = self.clock()
        args = (_num(now), holder, limit, _num(now + ttl), _backstop_ms(ttl))
        return bool(await self._script("sem_acquire", self._key(SEMAPHORE, key), *args))

    async def semaphore_release(self, key: str, holder: str) -> bool:
        args = (_num(self.clock()), holder)
        return bool(await self._script("sem_release", self._key(SEMAPHORE, key), *args))

    async def semaphore_refresh(self, key: str, holder: str, *, ttl: float) -> bool:
        now = self.clock()
        args = (_num(now), holder, _num(now + ttl), _backstop_ms(ttl))
        return bool(await self._script("sem_refresh", self._key(SEMAPHORE, key), *args))

    async def semaphore_count(self, key: str) -> int:
        now = f"({_num(self.clock())}"
        return await self._client().zcount(self._key(SEMAPHORE, key), now, "+inf")

    # -- maintenance ---------------------------------------------------------------------

    async def clear_prefix(self, prefix: str) -> int:
        removed = 0
        for namespace in (RECORD, WINDOW, SEMAPHORE):
            async for keys in self._scan_batches(namespace, prefix):
                removed += await self._client().unlink(*keys)
        return removed
