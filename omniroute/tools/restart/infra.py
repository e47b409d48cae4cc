"""The processes and places of ``manage.py restarttest``: a gateway that can be killed with
SIGKILL and started again on the same data, the per-run PostgreSQL database and Redis key
prefix of the service-backed mode, and a bounded background load.

Everything runs on 127.0.0.1; the run removes what it created (its data directory, database and
keys) when it ends, whatever the outcome.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from omniroute.tools.loadgen import free_port, gateway_env, manage, wait_for_port

STORE_TIMEOUT_MS = "250"  # a loaded 2-core machine can queue a healthy Redis call past 50 ms
PG_ADMIN_DB = "postgres"
HI = [{"role": "user", "content": "hi"}]


@dataclass(frozen=True, slots=True)
class Services:
    """Where the service-backed mode keeps its state: a server URL each, the run's own names."""

    pg_url: str  # the server (its database is not used), postgres://postgres@127.0.0.1:5432
    redis_url: str  # the server and db, e.g. redis://127.0.0.1:6379/15


def reachable(services: Services) -> str | None:
    """``None`` when both servers answer, else why not."""
    import psycopg
    import redis

    try:
        psycopg.connect(_pg_conninfo(services.pg_url, PG_ADMIN_DB), connect_timeout=2).close()
        redis.Redis.from_url(services.redis_url, socket_connect_timeout=2).ping()
    except Exception as error:  # any failure to connect means "not here"
        return f"{type(error).__name__}: {error}"
    return None


def _pg_conninfo(server_url: str, database: str) -> str:
    """``server_url`` (any database, or none) pointed at ``database``."""
    parts = urlsplit(server_url.replace("postgres://", "postgresql://", 1))
    return urlunsplit(parts._replace(path=f"/{database}"))


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh, empty database for this run (its DATABASE_URL), dropped afterwards."""
    import psycopg

    name = f"omniroute_restart_{secrets.token_hex(4)}"
    admin = _pg_conninfo(server_url, PG_ADMIN_DB)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_conninfo(server_url, name).replace("postgresql://", "postgres://", 1)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this run's own; its keys are deleted afterwards."""
    import redis

    prefix = f"omniroute-restart-{secrets.token_hex(4)}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()


@contextmanager
def data_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="omniroute-restart-") as path:
        yield path


def prepared_env(path: str, overrides: dict[str, str]) -> tuple[dict[str, str], str]:
    """The gateway's environment on ``path`` (plus ``overrides``), migrated; an operator key."""
    env = {**gateway_env(path), "OMNIROUTE_STORE_TIMEOUT_MS": STORE_TIMEOUT_MS, **overrides}
    subprocess.run(manage("migrate", "--noinput", "-v", "0"), env=env, check=True)
    key = subprocess.run(
        manage("createapikey", "--name", "restart-operator", "--scope", "manage"),
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return env, key


@dataclass
class GatewayProcess:
    """One ``manage.py serve`` process (``serve`` execs daphne: the pid is the server's)."""

    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        argv = manage("serve", "--port", str(self.port), "--no-collectstatic")
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                argv, env=self.env, stdout=subprocess.DEVNULL, stderr=sink
            )
        wait_for_port(self.port, timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # listening is not yet answering
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the gateway did not answer within {timeout} s")

    def kill(self, then: Callable[[], object] = lambda: None) -> None:
        """SIGKILL: no shutdown hook, no flush, nothing the process could still write. ``then``
        runs right after the signal, before the (slower) wait for the process to be gone."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            then()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Load:
    """Closed-loop client load (``workers`` threads, streaming and not) until stopped, or
    ``max_requests`` or ``max_seconds``: whichever comes first."""

    url: str
    key: str
    model: str
    workers: int = 4
    pause: float = 0.02  # per worker between requests: a load, not a saturation of 2 cores
    max_requests: int = 5000
    max_seconds: float = 120.0
    ok: int = 0
    failed: int = 0
    issued: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # of the failures
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        deadline = time.monotonic() + self.max_seconds
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, args=(n, deadline), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _work(self, n: int, deadline: float) -> None:
        headers = {"authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=10) as client:
            sent = 0
            while not self._stop.is_set() and time.monotonic() < deadline:
                with self._lock:
                    if self.issued >= self.max_requests:
                        return
                    self.issued += 1
                stream = (n + sent) % 2 == 1
                sent += 1
                body: dict[str, Any] = {"model": self.model, "stream": stream, "messages": HI}
                try:
                    answer = client.post("/v1/chat/completions", json=body)
                    good = answer.status_code == 200 and bool(answer.content)
                    reason = f"HTTP {answer.status_code}"
                except httpx.HTTPError as error:
                    good, reason = False, type(error).__name__
                with self._lock:
                    self.ok += good
                    self.failed += not good
                    if not good:
                        self.reasons[reason] += 1
                self._stop.wait(self.pause)

    def wait(self) -> tuple[int, int]:
        """Until the bound is reached: (answered, failed)."""
        for thread in self._threads:
            thread.join(timeout=self.max_seconds + 15)
        return self.ok, self.failed

    def halt(self) -> None:
        """Start no more requests (those in flight run on)."""
        self._stop.set()

    def stop(self) -> tuple[int, int]:
        """Halt, and wait for the requests in flight: (answered, failed)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)
        return self.ok, self.failed
