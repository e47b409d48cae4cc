"""Stopping the gateway: SIGINT (Ctrl-C) and SIGTERM end ``manage.py serve`` cleanly.

The gateway runs as a process of its own with its output captured to a file; one request
through it opens an upstream connection pool (an aiohttp session). The stop must close that
pool (no ``Unclosed client session`` at exit), print no traceback and exit 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from routing.fakeupstream import FakeUpstream
from tests.conftest import free_port
from tests.e2e.conftest import ROOT, Gateway, _wait_until_serving, make_route, prepare_gateway

pytestmark = pytest.mark.e2e

STOP_SECONDS = 15


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    return prepare_gateway(tmp_path_factory.mktemp("shutdown-gateway"))


@contextmanager
def interruptible() -> Iterator[None]:
    """A process started in the block stops on SIGINT, even when this one was started with
    SIGINT ignored (a background job): a handled signal is reset to its default on exec, an
    ignored one stays ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def serve_and_stop(
    env: dict[str, str], manage_key: str, fake: FakeUpstream, stop: signal.Signals, log: Path
) -> int:
    """Start a gateway, send one request through it, stop it with ``stop``: its exit code."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port)]
    with log.open("wb") as sink, interruptible():
        process = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_serving(url, process)
        gateway = Gateway(url, manage_key, process.pid)
        route = make_route(gateway, fake)
        body = {"model": route.model(), "messages": [{"role": "user", "content": "x"}]}
        with gateway.client(route.key) as client:
            assert client.post("/chat/completions", json=body).status_code == 200
        process.send_signal(stop)
        return process.wait(timeout=STOP_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_closes_the_upstream_pools_and_exits_0(
    prepared: tuple[dict[str, str], str],
    fake: FakeUpstream,
    stop: signal.Signals,
    tmp_path: Path,
) -> None:
    env, manage_key = prepared
    log = tmp_path / "gateway.log"

    code = serve_and_stop(env, manage_key, fake, stop, log)

    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "Unclosed client session" not in output and "Unclosed connector" not in output
    assert "Traceback" not in output and " ERROR " not in output, output
