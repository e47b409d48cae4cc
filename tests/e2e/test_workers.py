"""``manage.py serve --workers 2``: a supervisor and two worker processes on one socket.

Each worker is shown to serve on its own by stopping (SIGSTOP) every other worker while a
request is made on a fresh connection: the kernel then hands it to the one still accepting.
Any worker's /metrics counts every worker's requests. A worker killed with SIGKILL is replaced,
and the replacement accepts within ``RESTART_BOUND_SECONDS``. A breaker opened through one
worker is what the other reports and acts on. A connection limited to 60 requests a minute lets
60 through in the minute, whichever worker takes them. A stop ends every worker cleanly. A
supervisor refuses to start workers whose state would be their own (no Redis, or SQLite).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.conftest import free_port
from tests.e2e.conftest import (
    ROOT,
    Gateway,
    Route,
    _gateway_env,
    make_route,
    prepare_gateway,
    records,
    serving,
)
from tests.e2e.dashboard_support import MESSAGES, failing_route, open_breaker
from tests.e2e.test_metrics import counted, scrape
from tests.e2e.test_queue_processes import knows_route, queued, send
from tests.e2e.test_shutdown import serve_and_stop

pytestmark = pytest.mark.e2e

WORKERS = 2
RESTART_BOUND_SECONDS = 10  # a restarted worker accepts again within 10 s (docs/deploying.md)
ANSWER_BOUND_SECONDS = 30  # generous: for a worker still starting on a loaded machine
T = TypeVar("T")


@pytest.fixture
def workers(tmp_path: Path, shared_services: dict[str, str]) -> Iterator[Gateway]:
    env, manage_key = prepare_gateway(tmp_path, **shared_services)
    with serving(env, manage_key, "--workers", str(WORKERS)) as supervised:
        yield supervised


def worker_pids(supervisor: int) -> set[int]:
    """The supervisor's child processes (from /proc: field 4 of ``stat`` is the parent)."""
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        if int(stat.rsplit(")", 1)[1].split()[1]) == supervisor:
            children.add(int(entry.name))
    return children


def wait_for(condition: Callable[[], T | None], within: float, what: str) -> T:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = condition()
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {within} s")


@contextmanager
def alone(
    gateway: Gateway, pid: int, workers: set[int], within: float = ANSWER_BOUND_SECONDS
) -> Iterator[Gateway]:
    """Every worker but ``pid`` stopped (SIGSTOP) for the block, so only ``pid`` accepts; the
    gateway with an operator client of its own (no connection kept from before), once ``pid``
    answers /healthz (``within`` seconds)."""
    others = workers - {pid}
    for other in others:
        os.kill(other, signal.SIGSTOP)
    fresh = Gateway(gateway.url, gateway.manage_key, gateway.pid)
    try:
        wait_for(lambda: healthz_answers(fresh), within, f"worker {pid} answering")
        yield fresh
    finally:
        fresh.api.close()
        for other in others:
            os.kill(other, signal.SIGCONT)


def healthz_answers(gateway: Gateway) -> bool | None:
    """Whether a fresh connection gets /healthz's 200 (``None`` while nobody answers)."""
    try:
        response = httpx.get(f"{gateway.url}/healthz", timeout=1)
    except httpx.TransportError:
        return None
    return response.status_code == 200 or None


def chat_status(gateway: Gateway, key: str, model: str) -> int:
    with gateway.client(key, timeout=ANSWER_BOUND_SECONDS) as client:
        response = client.post("/chat/completions", json={"model": model, "messages": MESSAGES})
        return response.status_code


def serves_new_key(gateway: Gateway, route: Route, pid: int) -> None:
    """Wait until worker ``pid`` (alone) answers ``route``'s request with a 200: its key was
    made through one worker, and the others know it within OMNIROUTE_CONFIG_POLL_SECONDS
    (docs/deploying.md)."""
    wait_for(
        lambda: chat_status(gateway, route.key, route.model()) == 200 or None,
        ANSWER_BOUND_SECONDS,
        f"worker {pid} serving the new key",
    )


def two_workers(supervisor: Gateway) -> set[int]:
    def both() -> set[int] | None:
        pids = worker_pids(supervisor.pid)
        return pids if len(pids) == WORKERS else None

    return wait_for(both, ANSWER_BOUND_SECONDS, "two workers")


def test_two_workers_serve_and_a_killed_worker_is_replaced(
    workers: Gateway, fake: FakeUpstream
) -> None:
    pids = two_workers(workers)
    route = make_route(workers, fake)
    for served, pid in enumerate(pids, start=1):
        with alone(workers, pid, pids) as gateway:
            serves_new_key(gateway, route, pid)
            # A request is counted once its answer has gone out: stop no worker before that.
            wait_for(
                lambda: counted(scrape(gateway), route.provider) == served or None,  # noqa: B023
                ANSWER_BOUND_SECONDS,
                f"worker {pid}'s request counted",
            )
    with alone(workers, min(pids), pids) as gateway:
        # Both workers' requests are in either worker's /metrics (one multiprocess directory).
        wait_for(
            lambda: counted(scrape(gateway), route.provider) == WORKERS or None,
            ANSWER_BOUND_SECONDS,
            f"{WORKERS} requests counted",
        )

    killed = min(pids)
    os.kill(killed, signal.SIGKILL)
    killed_at = time.monotonic()

    def replaced() -> set[int] | None:
        now = worker_pids(workers.pid)
        return now if len(now) == WORKERS and killed not in now else None

    after = wait_for(replaced, RESTART_BOUND_SECONDS, "a replacement worker")
    (new,) = after - pids
    left = RESTART_BOUND_SECONDS - (time.monotonic() - killed_at)
    with alone(workers, new, after, within=left) as gateway:
        assert chat_status(gateway, route.key, route.model()) == 200
    survivor = after - {new}
    with alone(workers, survivor.pop(), after) as gateway:
        assert chat_status(gateway, route.key, route.model()) == 200


def breaker_state(gateway: Gateway, provider: str) -> str | None:
    """The provider's breaker state in /api/monitoring/health."""
    payload: dict[str, Any] = gateway.api.get("/api/monitoring/health").json()
    found = [b["state"] for b in payload["providerBreakers"] if b["name"] == provider]
    return found[0] if found else None


def test_a_breaker_opened_through_one_worker_is_open_on_the_other(
    workers: Gateway, fake: FakeUpstream
) -> None:
    pids = two_workers(workers)
    first, second = sorted(pids)
    route, healthy = failing_route(workers, fake), make_route(workers, fake)
    # Each worker serves a request first: the configuration above is read, and the one-off
    # restore of persisted breakers is behind it, so the second worker can only learn of the
    # breaker through the shared store.
    for pid in pids:
        with alone(workers, pid, pids) as gateway:
            serves_new_key(gateway, healthy, pid)
    with alone(workers, first, pids) as gateway:
        open_breaker(gateway, route)
    sent = len(records(fake, route))
    with alone(workers, second, pids) as gateway:
        assert breaker_state(gateway, route.provider) == "open"
        with gateway.client(route.key) as client:
            body = {"model": route.model(), "messages": MESSAGES}
            refused = client.post("/chat/completions", json=body)
    # The second worker refused on the breaker's open state, without calling the upstream.
    assert refused.json()["error"]["code"] == "provider_circuit_open", refused.text
    assert len(records(fake, route)) == sent


RPM = 60  # a connection limited to 60 requests a minute (the limiter's window is sliding)
MIN_TIME_MS = 50


def test_a_connection_limited_per_minute_is_limited_across_the_workers(
    workers: Gateway, fake: FakeUpstream
) -> None:
    """The limit's worth of requests through one worker, then as many through the other: the
    second worker's requests wait for the shared window until their clients give up (10 s),
    and never reach the upstream."""
    pids = two_workers(workers)
    first, second = sorted(pids)
    route = make_route(
        workers,
        fake,
        {},
        served_models=["gpt-test"],
        connection_fields=[
            {
                "rate_limit_protection": True,
                "rate_limit_overrides": {"rpm": RPM, "minTime": MIN_TIME_MS},
            }
        ],
    )
    started = time.monotonic()
    replies = {}
    for pid in (first, second):
        with alone(workers, pid, pids) as gateway:
            wait_for(lambda: knows_route(gateway, route) or None, ANSWER_BOUND_SECONDS, "route")
            replies[pid] = asyncio.run(send(gateway, route, RPM))
            wait_for(lambda: queued(gateway, route) == 0 or None, ANSWER_BOUND_SECONDS, "no queue")

    def answered(pid: int) -> int:
        return sum(isinstance(r, httpx.Response) and r.status_code == 200 for r in replies[pid])

    assert time.monotonic() - started < 60  # all of it within one minute
    assert len(records(fake, route)) == RPM
    assert (answered(first), answered(second)) == (RPM, 0)


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_ends_every_worker_cleanly_and_exits_0(
    tmp_path: Path,
    fake: FakeUpstream,
    shared_services: dict[str, str],
    stop: signal.Signals,
    server: str,
) -> None:
    env, manage_key = prepare_gateway(tmp_path, **shared_services)
    log = tmp_path / "gateway.log"
    options = ("--workers", str(WORKERS), "--server", server)

    code, _ = serve_and_stop(env, manage_key, fake, stop, log, *options)

    output = log.read_text(errors="replace")
    assert code == 0, output
    assert "Unclosed client session" not in output and "Unclosed connector" not in output
    assert "Traceback" not in output and " ERROR " not in output, output
    assert "still running after" not in output, output  # none had to be killed


def refusal(tmp_path: Path, **shared: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in _gateway_env(tmp_path).items() if k not in ("DATABASE_URL", "REDIS_URL")
    }
    port = str(free_port())
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--workers", "2", "--port", port]
    return subprocess.run(
        argv, env={**env, **shared}, capture_output=True, text=True, timeout=60, check=False
    )


def test_workers_are_refused_without_redis(tmp_path: Path) -> None:
    refused = refusal(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres")
    assert refused.returncode != 0
    assert "CommandError" in refused.stderr and "REDIS_URL" in refused.stderr
    assert "SQLite" not in refused.stderr and "Traceback" not in refused.stderr


def test_workers_are_refused_on_sqlite(tmp_path: Path) -> None:
    refused = refusal(tmp_path, REDIS_URL="redis://127.0.0.1:6379/15")
    assert refused.returncode != 0
    assert "CommandError" in refused.stderr and "SQLite" in refused.stderr
    assert "REDIS_URL" not in refused.stderr and "Traceback" not in refused.stderr
