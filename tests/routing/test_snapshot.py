"""The configuration snapshot: what it materialises, and when it is rebuilt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from omniroute.core import config_version
from omniroute.core.config_version import CONFIG_VERSION_KEY, config_changed, config_remote_version
from omniroute.core.store import MemoryStore
from routing.domain.config.keys import hash_key
from routing.domain.config.snapshot import ComboStep, ConfigSnapshot
from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.selectors import config_snapshot_build
from routing.services import api_key_create, combo_save, connection_save
from routing.snapshot import current_snapshot, snapshot_clear
from tests.routing.conftest import UPSTREAM_SECRET

BACKUP_URL = "https://backup.example.com/v1/"


@dataclass(frozen=True)
class Built:
    """A snapshot built from a known configuration, with the ids it should contain."""

    snapshot: ConfigSnapshot
    primary: int
    restricted_key: str


def _connection(provider: Provider, name: str, **fields: object) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(), fields={"provider": provider, "name": name, **fields}
    )


def _combos(provider: Provider, other: Provider, pinned: ProviderConnection) -> None:
    steps = [
        {"provider": provider, "model": "zeta"},
        {"provider": other, "model": "alpha"},
        {"provider": provider, "model": "beta", "connection": pinned, "weight": 3},
    ]
    combo_save(combo=Combo(), fields={"name": "team"}, targets=steps)
    combo_save(combo=Combo(), fields={"name": "retired", "is_active": False}, targets=[])


@pytest.fixture
def built(provider: Provider, other_provider: Provider, connection: ProviderConnection) -> Built:
    """primary (priority 100), backup (10), off (1, inactive), a restricted key, two combos."""
    _connection(provider, "backup", priority=10, served_models=["gpt-x"], base_url=BACKUP_URL)
    _connection(provider, "off", priority=1, is_active=False)
    _connection(other_provider, "elsewhere")
    _, plaintext = api_key_create(
        name="restricted", allowed_models=["mock/*"], allowed_connections=[connection]
    )
    _combos(provider, other_provider, connection)
    return Built(config_snapshot_build(version=7, remote_version=3), connection.pk, plaintext)


@pytest.mark.django_db
def test_build_carries_versions_and_providers(built: Built) -> None:
    snapshot = built.snapshot

    assert (snapshot.version, snapshot.remote_version) == (7, 3)
    mock = snapshot.providers["mock"]
    assert (mock.base_url, mock.wire_format) == ("http://127.0.0.1:8100/v1", "openai")
    assert "anthropic" in snapshot.providers


@pytest.mark.django_db
def test_build_lists_active_connections_by_priority(built: Built) -> None:
    mock = built.snapshot.connections_for("mock")

    assert [c.name for c in mock] == ["backup", "primary"]
    assert [c.name for c in built.snapshot.connections_for("openai")] == ["elsewhere"]
    backup, primary = mock
    assert (primary.id, primary.secret) == (built.primary, UPSTREAM_SECRET)
    assert primary.served_models == ()
    assert (backup.secret, backup.served_models) == (None, ("gpt-x",))
    assert backup.base_url == BACKUP_URL.rstrip("/")
    assert primary.base_url == "http://127.0.0.1:8100/v1"


@pytest.mark.django_db
def test_build_indexes_keys_by_hash(built: Built) -> None:
    key = built.snapshot.keys_by_hash[hash_key(built.restricted_key)]

    assert key.name == "restricted"
    assert key.allowed_models == ("mock/*",)
    assert key.allowed_connections == frozenset({built.primary})
    assert built.restricted_key not in built.snapshot.keys_by_hash


@pytest.mark.django_db
def test_build_keeps_active_combos_with_steps_in_order(built: Built) -> None:
    assert set(built.snapshot.combos) == {"team"}
    team = built.snapshot.combos["team"]

    assert team.strategy == "priority"
    assert team.steps == (
        ComboStep("mock", "zeta"),
        ComboStep("openai", "alpha"),
        ComboStep("mock", "beta", built.primary, 3),
    )


# --- current_snapshot -----------------------------------------------------------------------


@pytest.fixture
def fresh_snapshot() -> None:
    """Forget any snapshot a previous test built."""
    snapshot_clear()


def _late_key_hash() -> str:
    return hash_key("sk-omr-late")


@pytest.mark.django_db(transaction=True)
async def test_current_snapshot_is_reused_until_config_changed(fresh_snapshot: None) -> None:
    first = await current_snapshot()
    # Written behind the services' back: nobody announced it.
    await ClientApiKey.objects.acreate(name="late", key_hash=_late_key_hash(), prefix="sk-omr-la")

    assert await current_snapshot() is first
    assert _late_key_hash() not in first.keys_by_hash

    config_changed()
    second = await current_snapshot()

    assert second is not first
    assert _late_key_hash() in second.keys_by_hash
    assert await current_snapshot() is second


@pytest.mark.django_db(transaction=True)
async def test_a_service_write_replaces_the_snapshot(fresh_snapshot: None) -> None:
    first = await current_snapshot()

    _, plaintext = await database_sync_to_async(api_key_create)(name="new")

    second = await current_snapshot()
    assert second is not first
    assert hash_key(plaintext) in second.keys_by_hash


@pytest.mark.django_db(transaction=True)
async def test_concurrent_readers_share_one_build(fresh_snapshot: None) -> None:
    one, two = await asyncio.gather(current_snapshot(), current_snapshot())

    assert one is two


async def test_a_forgotten_snapshot_is_rebuilt_on_the_shared_version_as_it_is_now(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    store = MemoryStore()
    monkeypatch.setattr(config_version, "store_is_shared", lambda: True)
    monkeypatch.setattr(config_version, "get_store", lambda: store)
    settings.CONFIG_POLL_SECONDS = 60
    snapshot_clear()
    assert await config_remote_version() == 0
    await store.incr(CONFIG_VERSION_KEY)  # another process announced a change
    assert await config_remote_version() == 0  # within the poll interval: the value read before

    snapshot_clear()

    assert await config_remote_version() == 1
