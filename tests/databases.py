"""Databases and Redis key prefixes a test run makes for itself, and removes afterwards.

PostgreSQL: a run never writes to the database named in ``DATABASE_URL``; it only uses that
server. pytest-django's test database gets a name unique to the run (``omniroute.settings_test``)
and every gateway process the end-to-end tests start gets a fresh database made here
(``create_database``) and dropped when the run ends (``drop_database``).

Redis: the run's key prefix is ``OMNIROUTE_REDIS_PREFIX`` (``omniroute.settings_test`` makes a
unique one when none is given, ``omniroute-test-<pid>-<hex>:``). Every other prefix a test uses
hangs off it (``redis_prefix``: ``omniroute-test-<pid>-<hex>-<tag>-<hex>:``), so the run's keys
are exactly those matching ``run_key_patterns()``, and the session deletes them at the end
(``delete_keys``).
"""

from __future__ import annotations

import os
import re
import secrets
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import sql
from redis.exceptions import RedisError

# The schemes django-environ reads as PostgreSQL.
POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql", "psql")
MAINTENANCE_DATABASE = "postgres"
CONNECT_TIMEOUT_SECONDS = 3
# The Redis the suite's own Redis tests use when ``REDIS_URL`` is not set.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DELETE_BATCH = 500

# (server URL, name) of every database the run made; dropped at its end.
_made: list[tuple[str, str]] = []


def is_postgres(url: str) -> bool:
    """Whether ``url`` (a ``DATABASE_URL``) names a PostgreSQL database."""
    return urlsplit(url).scheme in POSTGRES_SCHEMES


def on_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (user, host, port and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(("postgresql", parts.netloc, f"/{name}", parts.query, ""))


def unique_database_name(kind: str) -> str:
    """``test_omniroute_<kind>_<pid>_<hex>``: no other run (or test) picks the same name."""
    return f"test_omniroute_{kind}_{os.getpid()}_{secrets.token_hex(4)}"


def _maintenance(url: str) -> psycopg.Connection[tuple[object, ...]]:
    server = on_database(url, MAINTENANCE_DATABASE)
    return psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)


def create_database(url: str, name: str) -> str:
    """Create the empty database ``name`` on ``url``'s server; return its URL.

    Raises ``psycopg.OperationalError`` when the server does not answer."""
    with _maintenance(url) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return on_database(url, name)


def drop_database(url: str, name: str) -> None:
    """Drop ``name`` on ``url``'s server, ending the connections still open on it."""
    with _maintenance(url) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        admin.execute(drop.format(sql.Identifier(name)))


def database_exists(url: str, name: str) -> bool:
    with _maintenance(url) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        return found.fetchone() is not None


def gateway_database(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a gateway: under a PostgreSQL ``DATABASE_URL``, on a new database of its own
    (dropped by ``drop_made_databases``). Processes started with the same environment share it.

    Raises ``psycopg.OperationalError`` when the server does not answer."""
    url = env.get("DATABASE_URL", "")
    if not is_postgres(url):
        return env
    name = unique_database_name("gw")
    made = create_database(url, name)
    remember_database(url, name)
    return {**env, "DATABASE_URL": made}


def remember_database(url: str, name: str) -> None:
    """Have ``drop_made_databases`` drop ``name`` on ``url``'s server (if still there)."""
    _made.append((url, name))


def drop_made_databases() -> None:
    """Drop every database made (or remembered) in this process."""
    while _made:
        drop_database(*_made.pop())


def end_other_sessions(connection: BaseDatabaseWrapper) -> None:
    """End every other session on ``connection``'s database (PostgreSQL only)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def suite_redis_url() -> str:
    """The Redis the run's tests write to: ``REDIS_URL``, else the suite's local default."""
    return os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def run_prefix() -> str:
    """The run's own Redis key prefix (``OMNIROUTE_REDIS_PREFIX``)."""
    return os.environ["OMNIROUTE_REDIS_PREFIX"]


def redis_prefix(tag: str = "t") -> str:
    """A fresh key prefix under the run's: ``<run prefix without ':'>-<tag>-<hex>:``."""
    return f"{run_prefix().rstrip(':')}-{tag}-{secrets.token_hex(6)}:"


def run_key_patterns(prefix: str) -> list[str]:
    """SCAN patterns matching the keys of the run whose prefix is ``prefix``, and no other's."""
    escaped = re.sub(r"([*?\[\]\\])", r"\\\1", prefix)
    root = re.sub(r"([*?\[\]\\])", r"\\\1", prefix.rstrip(":"))
    return [f"{escaped}*", f"{root}-*"]


def delete_keys(url: str, patterns: list[str]) -> int:
    """Delete every key matching one of ``patterns`` (SCAN, then UNLINK); return how many.

    Does nothing (0) when no Redis answers at ``url``: then the run wrote no keys there."""
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=10)
    deleted = 0
    try:
        for pattern in patterns:
            batch: list[bytes] = []
            for key in client.scan_iter(match=pattern, count=DELETE_BATCH):
                batch.append(key)
                if len(batch) == DELETE_BATCH:
                    deleted += int(client.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(client.unlink(*batch))
    except (RedisError, OSError):
        return deleted
    finally:
        client.close()
    return deleted
