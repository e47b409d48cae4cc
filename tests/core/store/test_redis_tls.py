"""``rediss://`` with a password, as Redis across hosts is reached (docs/deploying.md): the
state store and the channel layer both work through a TLS-only server that wants AUTH, and the
server's certificate is verified (a URL without the authority that signed it is refused).

The server is this module's own, started with a throwaway authority (``openssl``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError

from omniroute.core.store import RedisStore, build_store
from omniroute.tools import redis_server
from tests.databases import redis_prefix
from tests.redis_server import RedisServer, redis_server_binary

PASSWORD = f"pw-{secrets.token_hex(8)}"


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with redis_server.tls_redis(redis_server_binary(), PASSWORD) as running:
        yield running


@pytest.fixture
async def store(server: RedisServer) -> AsyncIterator[RedisStore]:
    built = build_store(server.url, prefix=redis_prefix("tls"))
    assert isinstance(built, RedisStore)
    yield built
    await built.close()


def _without_query(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(query=""))


async def test_the_store_shares_state_over_tls_with_a_password(
    server: RedisServer, store: RedisStore
) -> None:
    assert server.url.startswith("rediss://")
    other = RedisStore(server.url, prefix=store.prefix)
    try:
        await store.set("breaker:x", {"state": "OPEN"})
        assert await other.get("breaker:x") == {"state": "OPEN"}
        assert await other.incr("n") == 1
        assert await store.incr("n") == 2
    finally:
        await other.close()


async def test_an_unverified_certificate_is_refused(server: RedisServer) -> None:
    untrusted = RedisStore(_without_query(server.url), prefix=redis_prefix("tls"))
    try:
        with pytest.raises(RedisConnectionError, match="certificate verify failed"):
            await untrusted.get("anything")
    finally:
        await untrusted.close()


async def test_the_channel_layer_carries_events_over_tls(server: RedisServer) -> None:
    layer = RedisChannelLayer(hosts=[server.url], prefix=redis_prefix("tls-asgi"))
    try:
        channel = await layer.new_channel()
        await layer.group_add("dashboard", channel)
        await layer.group_send("dashboard", {"type": "event", "text": "breaker opened"})
        assert await layer.receive(channel) == {"type": "event", "text": "breaker opened"}
    finally:
        await layer.flush()
        await layer.close_pools()
