"""Fixtures of the state store contract tests: a fake clock and a store per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from omniroute.core.store import MemoryStore, RedisStore, StateStore
from tests.core.store.support import CLOCK_START, redis_store_on_prefix
from tests.resilience.conftest import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """The fake clock of ``store`` and ``redis_store``."""
    return FakeClock(start=CLOCK_START)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[StateStore]:
    """An empty store on ``clock``: in memory, then in Redis on a prefix of its own."""
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    async with redis_store_on_prefix(clock) as redis_store:
        yield redis_store


@pytest.fixture
async def redis_store(clock: FakeClock) -> AsyncIterator[RedisStore]:
    """An empty Redis store on ``clock`` (skipped without a server)."""
    async with redis_store_on_prefix(clock) as redis_store:
        yield redis_store
