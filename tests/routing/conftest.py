"""Routing fixtures, each asked for by name (no autouse data)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator

import pytest
from rest_framework.test import APIClient

import routing.proxy.clock as proxy_clock
import routing.proxy.shell as proxy_shell
from omniroute.core import state as resilience_state
from omniroute.core import tasks
from omniroute.core.observability.metrics import clear_counted
from omniroute.core.store import MemoryStore
from resilience.services import resilience_settings_update
from routing.domain.config.vocabulary import Scope
from routing.models import Provider, ProviderConnection
from routing.services import api_key_create, connection_save
from routing.snapshot import snapshot_clear
from tests.routing.breaker_support import (
    A_BACKUP_SECRET,
    A_SECRET,
    B_SECRET,
    BREAKER_SETTINGS,
    add_uncooled,
)
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    FakeClock,
    FakeUpstream,
    FakeWriter,
    Gateway,
    add_connection,
    add_provider,
)

UPSTREAM_SECRET = "sk-upstream-SECRET-1234567890"


SEED = importlib.import_module("routing.migrations.0002_seed_providers")


@pytest.fixture
def request_metrics() -> Iterator[None]:
    """The families counted per request start empty (they are process-wide) and are emptied
    again after."""
    clear_counted()
    yield
    clear_counted()


@pytest.fixture
def provider(db: None) -> Provider:
    """The ``mock`` provider seeded by ``0002_seed_providers``."""
    return seeded_provider("mock")


@pytest.fixture
def other_provider(db: None) -> Provider:
    """A second seeded provider, for cross-provider checks."""
    return seeded_provider("openai")


def seeded_provider(slug: str) -> Provider:
    """A provider of the seeded catalog, re-seeded if a transactional test flushed it."""
    found = Provider.objects.filter(slug=slug).first()
    if found is not None:
        return found
    row = next(row for row in SEED.CATALOG if row[0] == slug)
    full_text, honors_scope, egress, per_model = (bool(flag) for flag in row[5:9])
    return Provider.objects.create(
        slug=slug,
        name=row[1],
        category=row[2],
        base_url=row[3],
        wire_format=row[4],
        full_text_rules=full_text,
        honors_rule_scope=honors_scope,
        egress_bucketed_lock=egress,
        per_model_quota=per_model,
    )


@pytest.fixture
def connection(provider: Provider) -> ProviderConnection:
    """A connection to ``provider`` holding ``UPSTREAM_SECRET``."""
    return connection_save(
        connection=ProviderConnection(),
        fields={"provider": provider, "name": "primary"},
        secret=UPSTREAM_SECRET,
    )


@pytest.fixture
def manage_key(db: None) -> str:
    """The plaintext of a key with the ``manage`` scope."""
    _, plaintext = api_key_create(name="operator", scopes=[Scope.MANAGE])
    return plaintext


@pytest.fixture
def plain_key(db: None) -> str:
    """The plaintext of a key without any scope."""
    _, plaintext = api_key_create(name="client")
    return plaintext


@pytest.fixture
def api_client() -> APIClient:
    """An unauthenticated DRF client."""
    return APIClient()


@pytest.fixture
def manage_client(api_client: APIClient, manage_key: str) -> APIClient:
    """A DRF client sending the manage key as a Bearer token."""
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {manage_key}")
    return api_client


# --- the in-process consumer harness (tests/routing/harness.py) -----------------------------


@pytest.fixture
def fresh_snapshot() -> None:
    """Forget any snapshot a previous test built."""
    snapshot_clear()


@pytest.fixture
def clock() -> FakeClock:
    """The fake clock of ``store``."""
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    """A fresh resilience store on the fake clock."""
    yield MemoryStore(clock=clock)
    await tasks.flush()  # let the write-through finish before the database is flushed


@pytest.fixture
def policy_clock(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The attempt policy's waits and the request deadline run on the fake clock: a wait
    advances it instead of sleeping. Backoff has no jitter here (so, at base × 0, no wait)."""

    async def pause(seconds: float) -> None:
        clock.advance(seconds)

    monkeypatch.setattr(proxy_clock, "now", clock)
    monkeypatch.setattr(proxy_clock, "pause", pause)
    monkeypatch.setattr(proxy_clock, "jitter", lambda: 0.0)
    return clock


@pytest.fixture
def gateway(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, db: None, policy_clock: FakeClock
) -> Gateway:
    """The chat consumer over a fake upstream (no behaviours yet) and ``store``, with a key."""
    _, key = api_key_create(name="client")
    return Gateway(key, FakeUpstream(), clock, store)


@pytest.fixture
def process_store(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make the gateway's store the process store, so operator services act on it too."""
    resilience_state.get_store.cache_clear()
    monkeypatch.setattr(resilience_state, "build_store", lambda *args, **kwargs: gateway.store)
    yield
    resilience_state.get_store.cache_clear()


@pytest.fixture
def acme(db: None) -> Provider:
    """An API-key provider ``acme`` (not seeded) at ``http://acme.test/v1``."""
    return add_provider("acme")


@pytest.fixture
def primary(acme: Provider) -> int:
    """``acme``'s first connection (priority 10), key ``PRIMARY``."""
    return add_connection(acme, "primary", PRIMARY, priority=10)


@pytest.fixture
def backup(acme: Provider) -> int:
    """``acme``'s second connection (priority 20), key ``BACKUP``."""
    return add_connection(acme, "backup", BACKUP, priority=20)


@pytest.fixture
def both(primary: int, backup: int) -> tuple[int, int]:
    """``acme``'s primary and backup connections, in that order."""
    return primary, backup


# --- the provider-breaker tests (tests/routing/breaker_support.py) ---------------------------


@pytest.fixture
def acme_primary(acme: Provider) -> int:
    """``acme``'s first key, never cooled: the breaker tests watch the breaker alone."""
    return add_uncooled(acme, "primary", A_SECRET, priority=10)


@pytest.fixture
def acme_backup(acme: Provider) -> int:
    return add_uncooled(acme, "backup", A_BACKUP_SECRET, priority=20)


@pytest.fixture
def bravo(db: None) -> Provider:
    return add_provider("bravo")


@pytest.fixture
def bravo_only(bravo: Provider) -> int:
    return add_uncooled(bravo, "only", B_SECRET, priority=10)


@pytest.fixture
def thresholds(db: None) -> None:
    """API-key providers open at 3 failures, degrade at 2, stay open 30 s; no retries."""
    resilience_settings_update(patch=BREAKER_SETTINGS)


@pytest.fixture
def request_log(monkeypatch: pytest.MonkeyPatch) -> FakeWriter:
    """The request log is on, its records kept by a fake writer."""
    writer = FakeWriter()
    monkeypatch.setattr(proxy_shell, "request_log_writer", lambda: writer)
    return writer
