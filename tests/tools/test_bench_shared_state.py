"""A paired bench side's shared state: a fresh PostgreSQL database and Redis key prefix, both
gone once the side is done."""

from __future__ import annotations

import os

import psycopg
import pytest
import redis

from omniroute.tools.bench.shared_state import SharedServers, shared_state
from tests.conftest import require_service
from tests.databases import (
    database_exists,
    delete_keys,
    drop_database,
    is_postgres,
    suite_redis_url,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def postgres_server() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if is_postgres(url):
        return url
    return os.environ.get("CI_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"


def test_a_side_gets_its_own_database_and_prefix_and_both_go_afterwards() -> None:
    servers = SharedServers(postgres_server(), suite_redis_url())
    client = redis.Redis.from_url(servers.redis, socket_connect_timeout=1)
    try:
        client.ping()
        psycopg.connect(servers.postgres, connect_timeout=3).close()
    except (redis.RedisError, psycopg.OperationalError) as error:
        require_service("PostgreSQL and Redis", error)
    made: dict[str, str] = {}
    try:
        with shared_state(servers, "after-twin") as env:
            made = env
            name = env["DATABASE_URL"].rsplit("/", 1)[1]
            prefix = env["OMNIROUTE_REDIS_PREFIX"]
            assert name.startswith("bench_omniroute_after_twin_")
            assert prefix.startswith("omniroute-bench-after-twin-")
            assert env["REDIS_URL"] == servers.redis
            assert database_exists(servers.postgres, name)
            client.set(f"{prefix}probe", "1")
            client.set(f"{prefix}asgi:group", "1")

        assert not database_exists(servers.postgres, name)
        assert client.exists(f"{prefix}probe", f"{prefix}asgi:group") == 0
    finally:
        if made:
            drop_database(servers.postgres, made["DATABASE_URL"].rsplit("/", 1)[1])
            delete_keys(servers.redis, [f"{made['OMNIROUTE_REDIS_PREFIX']}*"])
        client.close()
