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
import secrets
from urllib.parse import urlsplit

from django.db.backends.base.base import BaseDatabaseWrapper
from redis.exceptions import RedisError

from omniroute.tools.servers import create_database as create_database
from omniroute.tools.servers import drop_database as drop_database
from omniroute.tools.servers import maintenance, prefix_pattern, unlink_matching
from omniroute.tools.servers import on_database as on_database

# The schemes django-environ reads as PostgreSQL.
POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql", "psql")
# The Redis the suite's own Redis tests use when ``REDIS_URL`` is not set.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

# (server URL, name) of every database the run made; dropped at its end.
_made: list[tuple[str, str]] = []


def is_postgres(url: str) -> bool:
    """Whether ``url`` (a ``DATABASE_URL``) names a PostgreSQL database."""
    return urlsplit(url).scheme in POSTGRES_SCHEMES


def unique_database_name(kind: str) -> str:
    """``test_omniroute_<kind>_<pid>_<hex>``: no other run (or test) picks the same name."""
    return f"test_omniroute_{kind}_{os.getpid()}_{secrets.token_hex(4)}"


def database_exists(url: str, name: str) -> bool:
    with maintenance(url) as admin:
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
    return [prefix_pattern(prefix), prefix_pattern(f"{prefix.rstrip(':')}-")]


def delete_keys(url: str, patterns: list[str]) -> int:
    """Delete every key matching one of ``patterns``; return how many.

    Does nothing (0) when no Redis answers at ``url``: then the run wrote no keys there."""
    try:
        return unlink_matching(url, patterns)
    except (RedisError, OSError):
        return 0
