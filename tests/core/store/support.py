"""Redis plumbing of the state store contract tests: the server check and a throwaway store."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import redis.asyncio
from redis.exceptions import RedisError

from omniroute.core.store import RedisStore
from tests.databases import redis_prefix
from tests.resilience.conftest import FakeClock

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
PROCESS_TIMEOUT = 60.0
CLOCK_START = 1_000_000.0  # the contract tests' fake epoch


async def require_redis() -> None:
    """Skip (fail when ``CI=true``) unless a Redis server answers at ``REDIS_URL``."""
    client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        message = f"Redis not reachable at {REDIS_URL}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    finally:
        await client.aclose()


@asynccontextmanager
async def redis_store_on_prefix(clock: FakeClock | None) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` on a unique prefix, emptied and closed afterwards."""
    await require_redis()
    prefix = redis_prefix()
    store = RedisStore(REDIS_URL, prefix=prefix, clock=clock or time.time)
    try:
        yield store
    finally:
        await store.clear_prefix("")
        await store.close()
