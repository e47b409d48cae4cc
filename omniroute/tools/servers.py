"""Databases and Redis keys the tools and the tests make on servers they are given, and remove
afterwards: a fresh PostgreSQL database (made and dropped from the server's maintenance
database) and the keys under a prefix (found with SCAN, removed with UNLINK)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from psycopg import sql

MAINTENANCE_DATABASE = "postgres"
CONNECT_TIMEOUT_SECONDS = 3
DELETE_BATCH = 500


def on_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (user, host, port and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(("postgresql", parts.netloc, f"/{name}", parts.query, ""))


def maintenance(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection to the maintenance database of ``url``'s server."""
    server = on_database(url, MAINTENANCE_DATABASE)
    return psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)


def create_database(url: str, name: str) -> str:
    """Create the empty database ``name`` on ``url``'s server; return its URL.

    Raises ``psycopg.OperationalError`` when the server does not answer."""
    with maintenance(url) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return on_database(url, name)


def drop_database(url: str, name: str) -> None:
    """Drop ``name`` on ``url``'s server, ending the connections still open on it."""
    with maintenance(url) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        admin.execute(drop.format(sql.Identifier(name)))


def prefix_pattern(prefix: str) -> str:
    """The SCAN pattern of every key under ``prefix`` (its glob characters escaped)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"


def unlink_matching(url: str, patterns: list[str]) -> int:
    """Delete every key matching one of ``patterns``; return how many. Raises what redis-py
    raises when the server does not answer."""
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
    finally:
        client.close()
    return deleted
