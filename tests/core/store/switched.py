"""A primary store for ``ResilientStore`` tests that answers, fails, hangs or has restarted
on command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from omniroute.core.store import MemoryStore
from omniroute.core.store.base import RESTORING, StoreRestartedError
from tests.resilience.conftest import FakeClock

REFUSED = "Error 111 connecting to 127.0.0.1:6399. Connection refused."


class Restarted(StoreRestartedError):
    """What a primary whose server restarted raises; ``accept()`` puts it back ``up`` (or in
    ``after_accept``)."""

    def __init__(self, store: SwitchedStore) -> None:
        super().__init__("the server restarted")
        self.store = store

    def accept(self) -> None:
        self.store.accepted += 1
        self.store.mode = self.store.after_accept


class SwitchedStore:
    """A ``MemoryStore`` whose calls answer, fail, hang or refuse, as ``mode`` says:
    ``restarted`` refuses every call not under ``RESTORING`` until the restart is accepted."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = MemoryStore(clock=clock)
        self.clock = clock
        self.mode = "up"
        self.calls = 0
        self.cancelled = 0
        self.accepted = 0
        self.after_accept = "up"
        self.error: BaseException = RedisConnectionError(REFUSED)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.mode == "down":
                raise self.error
            if self.mode == "restarted" and not RESTORING.get():
                raise Restarted(self)
            if self.mode == "stall":
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled += 1
                    raise
            return await method(*args, **kwargs)

        return call
