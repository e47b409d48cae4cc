"""Stopping the gateway: SIGINT (Ctrl-C) and SIGTERM end ``manage.py serve`` cleanly, under
daphne and under uvicorn.

The gateway runs as a process of its own with its output captured to a file; one request
through it opens an upstream connection pool (an aiohttp session). The stop must close that
pool (no ``Unclosed client session`` at exit), print no traceback and exit 0; and the requests
answered just before it are all in the request log. A plain request still upstream when the
stop begins is answered, and a stream still open ends with the in-band
``server_shutting_down`` error (``omniroute.core.stopping``).
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from omniroute.core.stopping import SHUTDOWN_GRACE_SECONDS
from omniroute.tools.fakeupstream import FakeUpstream
from tests.conftest import free_port
from tests.e2e.conftest import (
    READ_TIMEOUT_SECONDS,
    ROOT,
    Gateway,
    Route,
    _wait_until_serving,
    make_route,
    manage,
    prepare_gateway,
    records,
)

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


@contextmanager
def serving(
    env: dict[str, str], manage_key: str, log: Path, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], Gateway]]:
    """A gateway (``serve`` with ``options``) running, its output in ``log``; killed on the
    way out if it is still running."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port), *options]
    with log.open("wb") as sink, interruptible():
        process = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_serving(url, process)
        yield process, Gateway(url, manage_key, process.pid)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


KEY_KNOWN_SECONDS = 10  # generous against OMNIROUTE_CONFIG_POLL_SECONDS (1 s)


def _known(ask: Callable[[], httpx.Response]) -> httpx.Response:
    """``ask``'s answer once the key is known where it lands: with several workers, a key made
    through one reaches the others within the config poll interval (docs/deploying.md)."""
    deadline = time.monotonic() + KEY_KNOWN_SECONDS
    response = ask()
    while response.status_code == 401 and time.monotonic() < deadline:
        time.sleep(0.1)
        response = ask()
    return response


def serve_and_stop(
    env: dict[str, str],
    manage_key: str,
    fake: FakeUpstream,
    stop: signal.Signals,
    log: Path,
    *options: str,
    requests: int = 1,
) -> tuple[int, list[str]]:
    """Start a gateway (``serve`` with ``options``), send ``requests`` requests through it,
    stop it with ``stop`` at once: its exit code and the requests' ids."""
    with serving(env, manage_key, log, *options) as (process, gateway):
        route = make_route(gateway, fake)
        body = {"model": route.model(), "messages": [{"role": "user", "content": "x"}]}
        ids = []
        with gateway.client(route.key) as client:
            for _ in range(requests):
                response = _known(lambda: client.post("/chat/completions", json=body))
                assert response.status_code == 200
                ids.append(response.headers["x-omniroute-request-id"])
        process.send_signal(stop)
        return process.wait(timeout=STOP_SECONDS), ids


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_closes_the_upstream_pools_and_exits_0(
    prepared: tuple[dict[str, str], str],
    fake: FakeUpstream,
    stop: signal.Signals,
    server: str,
    tmp_path: Path,
) -> None:
    env, manage_key = prepared
    log = tmp_path / "gateway.log"

    code, _ = serve_and_stop(env, manage_key, fake, stop, log, "--server", server)

    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "Unclosed client session" not in output and "Unclosed connector" not in output
    assert "Traceback" not in output and " ERROR " not in output, output


LOGGED_IDS = (
    "from omniroute.core.observability.requestlog.models import RequestLogEntry as E; "
    "print(*E.objects.values_list('request_id', flat=True))"
)


def test_the_requests_answered_before_a_sigterm_are_all_in_the_request_log(
    prepared: tuple[dict[str, str], str], fake: FakeUpstream, tmp_path: Path
) -> None:
    env, manage_key = prepared
    log = tmp_path / "gateway.log"

    code, ids = serve_and_stop(env, manage_key, fake, signal.SIGTERM, log, requests=5)

    assert code == 0, log.read_text(errors="replace")
    logged = set(manage("shell", "--no-imports", "-c", LOGGED_IDS, env=env).split())
    assert set(ids) <= logged


# The plain request is still upstream when the stop begins, and answers within the gateway's
# upstream read timeout.
PLAIN_LATENCY_MS = int(READ_TIMEOUT_SECONDS * 1000 * 2 / 3)
# The stream sends a chunk every CHUNK_INTERVAL_MS (never idle) for twice the stop's grace
# period: it is still open when the stop begins, and would be when the grace period ends.
CHUNK_INTERVAL_MS = 100
STREAMED_CHUNKS = SHUTDOWN_GRACE_SECONDS * 2 * 1000 // CHUNK_INTERVAL_MS


def asked(fake: FakeUpstream, route: Route, model: str) -> bool:
    """Whether a request for ``model`` through ``route`` reached the upstream."""
    return any(r.model == model for r in records(fake, route))


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
def test_a_sigterm_lets_a_plain_request_finish_and_ends_an_open_stream_in_band(
    prepared: tuple[dict[str, str], str], fake: FakeUpstream, server: str, tmp_path: Path
) -> None:
    env, manage_key = prepared
    log = tmp_path / "gateway.log"
    plain, streamed = f"slow-{secrets.token_hex(4)}", f"long-{secrets.token_hex(4)}"
    fake.set_model(plain, latency_ms=PLAIN_LATENCY_MS)
    fake.set_model(streamed, chunks=STREAMED_CHUNKS, chunk_interval_ms=CHUNK_INTERVAL_MS)
    try:
        with serving(env, manage_key, log, "--server", server) as (process, gateway):
            route = make_route(gateway, fake)
            ask = {"messages": [{"role": "user", "content": "x"}]}
            with (
                gateway.client(route.key, timeout=STOP_SECONDS) as client,
                ThreadPoolExecutor(1) as pool,
            ):
                with client.stream(
                    "POST",
                    "/chat/completions",
                    json={**ask, "model": route.model(streamed), "stream": True},
                ) as stream:
                    assert stream.status_code == 200
                    lines = stream.iter_lines()
                    events = [next(line for line in lines if '"content"' in line)]  # it has begun
                    answered = pool.submit(
                        client.post, "/chat/completions", json={**ask, "model": route.model(plain)}
                    )
                    upstream = fake.wait_for(lambda f: asked(f, route, plain), STOP_SECONDS)
                    assert upstream, "the plain request did not reach the upstream"

                    process.send_signal(signal.SIGTERM)

                    events += [line for line in lines if line]
                assert answered.result().status_code == 200
            code = process.wait(timeout=STOP_SECONDS)
    finally:
        fake.set_model(plain)
        fake.set_model(streamed)
    output = log.read_text(errors="replace")
    assert code == 0, output
    error = json.loads(events[-1].removeprefix("data: "))["error"]
    assert error["code"] == "server_shutting_down", events
    assert "Traceback" not in output and " ERROR " not in output, output
