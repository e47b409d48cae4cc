"""State a paired bench side shares among its workers: a fresh PostgreSQL database and a fresh
Redis key prefix on servers the operator names, made before the side starts and removed after
it stops.

``serve --workers N`` (N > 1) refuses SQLite and the memory store, so a side with several
workers runs on PostgreSQL and Redis; the one-worker side it is set against runs on the same
servers the same way (each side on its own database and prefix), so the comparison isolates
the worker count.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from omniroute.tools.servers import create_database, drop_database, prefix_pattern, unlink_matching


@dataclass(frozen=True, slots=True)
class SharedServers:
    """The PostgreSQL server (a URL naming any database on it: the bench makes its own) and the
    Redis the sides use."""

    postgres: str
    redis: str


def side_database_name(side: str) -> str:
    """``bench_omniroute_<side>_<pid>_<hex>``: unique to this run and side."""
    slug = re.sub(r"[^a-z0-9]+", "_", side.lower()).strip("_")
    return f"bench_omniroute_{slug}_{os.getpid()}_{secrets.token_hex(4)}"


def side_redis_prefix(side: str) -> str:
    """``omniroute-bench-<side>-<pid>-<hex>:``: unique to this run and side."""
    slug = re.sub(r"[^a-z0-9]+", "-", side.lower()).strip("-")
    return f"omniroute-bench-{slug}-{os.getpid()}-{secrets.token_hex(4)}:"


@contextmanager
def shared_state(servers: SharedServers, side: str) -> Iterator[dict[str, str]]:
    """A new database and key prefix for ``side``, as the variables a gateway reads
    (``DATABASE_URL``, ``REDIS_URL``, ``OMNIROUTE_REDIS_PREFIX``); the database is dropped (its
    open sessions ended) and the prefix's keys deleted on exit."""
    name, prefix = side_database_name(side), side_redis_prefix(side)
    made = create_database(servers.postgres, name)
    try:
        yield {
            "DATABASE_URL": made,
            "REDIS_URL": servers.redis,
            "OMNIROUTE_REDIS_PREFIX": prefix,
        }
    finally:
        try:
            drop_database(servers.postgres, name)
        finally:
            unlink_matching(servers.redis, [prefix_pattern(prefix)])
