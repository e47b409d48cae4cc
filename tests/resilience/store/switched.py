"""A primary store for ``ResilientStore`` tests that answers, fails or hangs on command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from resilience.store import MemoryStore
from tests.resilience.conftest import FakeClock

REFUSED = "Error 111 connecting to 127.0.0.1:6399. Connection refused."


class SwitchedStore:
    """A ``MemoryStore`` whose calls answer, fail or hang, as ``mode`` says."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = MemoryStore(clock=clock)
        self.clock = clock
        self.mode = "up"
        self.calls = 0
        self.cancelled = 0
        self.error: BaseException = RedisConnectionError(REFUSED)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.mode == "down":
                raise self.error
            if self.mode == "stall":
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled += 1
                    raise
            return await method(*args, **kwargs)

        return call
