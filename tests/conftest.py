"""Shared test helpers: service availability (required under CI=true) and free ports."""

from __future__ import annotations

import os
import socket

import pytest


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
