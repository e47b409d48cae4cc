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
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from psycopg import sql

MAINTENANCE_DATABASE = "postgres"
CONNECT_TIMEOUT_SECONDS = 3
DELETE_BATCH = 500


@dataclass(frozen=True, slots=True)
class SharedServers:
    """The PostgreSQL server (a URL naming any database on it: the bench makes its own) and the
    Redis the sides use."""

    postgres: str
    redis: str


def on_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (user, host, port and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(("postgresql", parts.netloc, f"/{name}", parts.query, ""))


def side_database_name(side: str) -> str:
    """``bench_omniroute_<side>_<pid>_<hex>``: unique to this run and side."""
    slug = re.sub(r"[^a-z0-9]+", "_", side.lower()).strip("_")
    return f"bench_omniroute_{slug}_{os.getpid()}_{secrets.token_hex(4)}"


def side_redis_prefix(side: str) -> str:
    """``omniroute-bench-<side>-<pid>-<hex>:``: unique to this run and side."""
    slug = re.sub(r"[^a-z0-9]+", "-", side.lower()).strip("-")
    return f"omniroute-bench-{slug}-{os.getpid()}-{secrets.token_hex(4)}:"


def _run_on_server(url: str, statement: sql.Composed) -> None:
    server = on_database(url, MAINTENANCE_DATABASE)
    with psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as admin:
        admin.execute(statement)


def delete_prefixed_keys(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (SCAN, then UNLINK)."""
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=10)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=DELETE_BATCH):
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                client.unlink(*batch)
                batch = []
        if batch:
            client.unlink(*batch)
    finally:
        client.close()


@contextmanager
def shared_state(servers: SharedServers, side: str) -> Iterator[dict[str, str]]:
    """A new database and key prefix for ``side``, as the variables a gateway reads
    (``DATABASE_URL``, ``REDIS_URL``, ``OMNIROUTE_REDIS_PREFIX``); the database is dropped (its
    open sessions ended) and the prefix's keys deleted on exit."""
    name, prefix = side_database_name(side), side_redis_prefix(side)
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    _run_on_server(servers.postgres, create)
    try:
        yield {
            "DATABASE_URL": on_database(servers.postgres, name),
            "REDIS_URL": servers.redis,
            "OMNIROUTE_REDIS_PREFIX": prefix,
        }
    finally:
        try:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            _run_on_server(servers.postgres, drop.format(sql.Identifier(name)))
        finally:
            delete_prefixed_keys(servers.redis, prefix)
