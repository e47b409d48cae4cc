"""Resilience fixtures, each asked for by name (no autouse data)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rest_framework.test import APIClient

from routing.domain.config.vocabulary import Scope
from routing.services import api_key_create

# Environment variables that move the settings defaults; tests of defaults clear them.
SETTINGS_ENV = (
    "PROVIDER_COOLDOWN_ENABLED",
    "PROVIDER_COOLDOWN_MIN_MS",
    "PROVIDER_COOLDOWN_MAX_MS",
    "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD",
    "OMNIROUTE_PROVIDER_BREAKER_API_KEY_DEGRADATION_THRESHOLD",
    "OMNIROUTE_UPSTREAM_READ_TIMEOUT",
    "STREAM_RECOVERY_ENABLED",
    "STREAM_RECOVERY_MIDSTREAM_ENABLED",
    "STREAM_THROUGHPUT_WATCHDOG_ENABLED",
    "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS",
    "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS",
    "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND",
    "STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES",
    "RATE_LIMIT_AUTO_ENABLE",
    "RATE_LIMIT_MAX_WAIT_MS",
    "RATE_LIMIT_MAX_QUEUE_DEPTH",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment override of the settings defaults this package asserts on."""
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api_client() -> APIClient:
    """An unauthenticated DRF client."""
    return APIClient()


def _key_client(**key: Any) -> APIClient:
    _, plaintext = api_key_create(**key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


@pytest.fixture
def manage_client(db: None) -> APIClient:
    """A DRF client holding a key with the ``manage`` scope."""
    return _key_client(name="operator", scopes=[Scope.MANAGE])


@pytest.fixture
def plain_client(db: None) -> APIClient:
    """A DRF client holding a key without any scope."""
    return _key_client(name="client")


# --- State stores for the breaker and window-gate services (both backends, fake clock) ---------
# Appended below the fixtures above, hence the late imports.

import os  # noqa: E402
from collections.abc import AsyncIterator, Callable, Iterator  # noqa: E402

import redis.asyncio  # noqa: E402
from asgiref.sync import async_to_sync  # noqa: E402
from pytest_django.fixtures import Settings  # noqa: E402
from redis.exceptions import RedisError  # noqa: E402

from omniroute.core import tasks  # noqa: E402
from omniroute.core.state import get_store  # noqa: E402
from omniroute.core.store import MemoryStore, RedisStore, StateStore  # noqa: E402
from resilience.api import health  # noqa: E402
from resilience.domain.breaker.machine import Breaker, BreakerPolicy  # noqa: E402
from resilience.services import breakers as breaker_services  # noqa: E402
from routing.snapshot import current_snapshot, snapshot_clear  # noqa: E402
from tests.conftest import require_service  # noqa: E402
from tests.databases import redis_prefix  # noqa: E402

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


class FakeClock:
    """A clock moved by hand: ``clock()`` is the fake time (epoch seconds), ``advance`` moves it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh fake clock (whole seconds keep the arithmetic exact)."""
    return FakeClock()


async def _require_redis() -> None:
    client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as error:
        require_service(f"Redis at {REDIS_URL}", error)
    finally:
        await client.aclose()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def state_store(
    request: pytest.FixtureRequest, fake_clock: FakeClock
) -> AsyncIterator[StateStore]:
    """An empty store on ``fake_clock``: in memory, then in Redis on a prefix of its own."""
    if request.param == "memory":
        yield MemoryStore(clock=fake_clock)
        return
    await _require_redis()
    store = RedisStore(REDIS_URL, prefix=redis_prefix(), clock=fake_clock)
    try:
        yield store
    finally:
        await store.clear_prefix("")
        await store.close()


class WriteLog:
    """The breaker write-through calls the services made, in order."""

    def __init__(self) -> None:
        self.saved: list[tuple[str, Breaker, BreakerPolicy | None]] = []
        self.deleted: list[str] = []


@pytest.fixture
def write_log(monkeypatch: pytest.MonkeyPatch) -> WriteLog:
    """Record the breaker services' database write-through instead of queueing it."""
    log = WriteLog()

    def saved(name: str, breaker: Breaker, policy: BreakerPolicy | None) -> asyncio.Future[None]:
        log.saved.append((name, breaker, policy))
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        written.set_result(None)  # as if already written: an opening awaits it
        return written

    monkeypatch.setattr(breaker_services, "persist_breaker", saved)
    monkeypatch.setattr(breaker_services, "persist_breaker_deleted", log.deleted.append)
    return log


@pytest.fixture
def process_store(settings: Settings) -> Iterator[StateStore]:
    """The process-wide store (``get_store()``), fresh, emptied afterwards; the health cache
    and the config snapshot start empty. Under ``REDIS_URL`` it gets a prefix of its own, so
    emptying it never touches another run's keys."""
    settings.REDIS_PREFIX = redis_prefix()
    get_store.cache_clear()
    health._cache.drop()
    snapshot_clear()
    store = get_store()
    yield store
    async_to_sync(store.clear_prefix)("")
    get_store.cache_clear()
    health._cache.drop()


FailProvider = Callable[..., BreakerPolicy]


@pytest.fixture
def fail_provider(process_store: StateStore) -> FailProvider:
    """``fail_provider(name, times=None)``: record failures of ``name`` on the process store
    with the provider's configured policy (default: its threshold, so it opens), wait for the
    write-through, and return the policy."""

    async def fail(name: str, times: int | None) -> BreakerPolicy:
        policy = (await current_snapshot()).breaker_policy(name)
        for _ in range(policy.failure_threshold if times is None else times):
            await breaker_services.breaker_record_failure(
                store=process_store, name=name, policy=policy
            )
        await tasks.flush()
        return policy

    def run(name: str, times: int | None = None) -> BreakerPolicy:
        return async_to_sync(fail)(name, times)

    return run
