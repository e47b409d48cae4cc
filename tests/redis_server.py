"""A throwaway ``redis-server`` for outage tests: :mod:`omniroute.tools.redis_server`,
skipped (failed when ``CI=true``) where no ``redis-server`` is installed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from omniroute.tools import redis_server
from omniroute.tools.redis_server import RedisServer

__all__ = ["RedisServer", "redis_server_binary", "running_redis"]


def redis_server_binary() -> str:
    """The ``redis-server`` executable; skip without one (fail when ``CI=true``)."""
    binary = redis_server.redis_server_binary()
    if binary is None:
        message = "redis-server is not installed (needed to start a Redis that can be killed)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; required when CI=true")
        pytest.skip(message)
    return binary


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A started server in a temporary directory; killed and removed afterwards."""
    with redis_server.running_redis(redis_server_binary()) as server:
        yield server
