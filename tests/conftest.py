"""Shared test helpers: service availability (required under CI=true) and free ports; at the
end of the run, the removal of the databases and Redis keys it made (``tests/databases.py``)."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from pytest_django import DjangoDbBlocker

from omniroute.core import state as resilience_state
from omniroute.core.store import MemoryStore
from tests.databases import (
    delete_keys,
    drop_made_databases,
    end_other_sessions,
    is_postgres,
    remember_database,
    run_key_patterns,
    suite_redis_url,
)

PRODUCTION_PREFIX = "omniroute:"  # settings.REDIS_PREFIX's default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_service(what: str, error: BaseException) -> None:
    """Skip with a message when a server is absent; fail instead when CI=true."""
    message = f"{what} is not reachable: {error}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (required when CI=true)")
    pytest.skip(message)


@pytest.fixture(autouse=True)
async def settle_background_writes() -> AsyncIterator[None]:
    """Let a test's write-through finish before the next test (or the database flush) starts.

    The gateway writes breaker and connection state and the proxy log in the background, on
    Django's sync thread; a write still queued when a test ends would otherwise land in the
    next test's database, or lock SQLite while the test database is flushed.
    """
    yield
    from omniroute.core import tasks
    from omniroute.dashboard.events import publisher
    from routing.proxy.guards import egress

    await tasks.flush()
    await publisher.settle()
    pending = [t for t in egress._background if t.get_loop() is asyncio.get_running_loop()]
    await asyncio.gather(*pending, return_exceptions=True)


@pytest.fixture
def staff_client(django_user_model: Any) -> Client:
    """A Django client logged in as a superuser (every admin test's operator)."""
    user = django_user_model.objects.create_superuser("root", "root@example.com", password=None)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def fresh_process_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    """A fresh in-process store as the process store (never a shared Redis, nothing left by
    another test), for the operator services, admin pages and API views that use it."""
    store = MemoryStore()
    resilience_state.get_store.cache_clear()
    monkeypatch.setattr(resilience_state, "build_store", lambda *args, **kwargs: store)
    yield store
    resilience_state.get_store.cache_clear()


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """The test process's garbage collector as it was, after a test that tuned it
    (omniroute/collector.py: a serving process's tuning)."""
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """pytest-django's test database, whose drop at the end would fail (with a mere warning,
    leaving the database behind) while a connection another thread opened is still on it: end
    those first. The end of the run drops it too, if it is still there."""
    url = os.environ.get("DATABASE_URL", "")
    if not is_postgres(url):
        yield
        return
    remember_database(url, str(connection.settings_dict["NAME"]))
    yield
    with django_db_blocker.unblock():
        end_other_sessions(connection)


@pytest.hookimpl(trylast=True)  # after the session fixtures (gateway processes) are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the databases the run made and delete every key under its Redis prefix."""
    drop_made_databases()
    prefix = os.environ.get("OMNIROUTE_REDIS_PREFIX")
    if prefix == PRODUCTION_PREFIX:  # never sweep a deployment's keys
        print(f"\nleaving Redis keys under {prefix!r}: that is the gateway's default prefix")
    elif prefix and not hasattr(session.config, "workerinput"):  # an xdist worker shares it
        delete_keys(suite_redis_url(), run_key_patterns(prefix))
