"""Fixtures of the fake upstream tests: one server per module, reset per test, and an httpx
client (it shadows pytest-django's ``client`` only in this package)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream


@pytest.fixture(scope="module")
def server() -> Iterator[FakeUpstream]:
    """A fake upstream serving the whole module."""
    with FakeUpstream().start() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeUpstream) -> FakeUpstream:
    """``server`` with its script and request log emptied."""
    server.reset()
    return server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client with a 5 s timeout."""
    async with httpx.AsyncClient(timeout=5.0) as c:
        yield c
