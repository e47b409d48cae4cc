"""How the bench serves its bare proxy (``omniroute.tools.bench.bare``): the gateway's server
entry (``python -m omniroute.server``, as ``manage.py serve`` runs it, with its flags) on the
ASGI application of that module, which forwards to the upstream named in its environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omniroute.tools.loadgen import spawned

UPSTREAM_VARIABLE = "OMNIROUTE_BARE_PROXY_UPSTREAM"
APPLICATION = "omniroute.tools.bench.bare:application"


def bare_proxy_argv(port: int) -> list[str]:
    """The bare proxy on 127.0.0.1:``port``, with ``manage.py serve``'s daphne flags."""
    server = ["-b", "127.0.0.1", "-p", str(port), "--proxy-headers", "-v", "0"]
    return [sys.executable, "-m", "omniroute.server", *server, APPLICATION]


@contextmanager
def bare_proxy(
    env: dict[str, str], port: int, upstream: str, *, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The bare proxy forwarding to ``upstream`` (a base URL), listening once this yields;
    stopped on exit."""
    with spawned(bare_proxy_argv(port), {**env, UPSTREAM_VARIABLE: upstream}, port, log=log) as p:
        yield p
