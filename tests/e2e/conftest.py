"""End-to-end harness: a real daphne gateway process and the fake upstream on 127.0.0.1.

The gateway runs as ``manage.py serve`` in a subprocess with its own data directory (under the
CI pass's DATABASE_URL / REDIS_URL: a fresh database on that server and a Redis key prefix of its
own, both removed when the run ends), configured only through the management API, exactly as an
operator would. Every test builds its own provider, connections and key, so tests
share one gateway without sharing state.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psycopg
import pytest
import redis
from cryptography.fernet import Fernet
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from omniroute.tools.fakeupstream import FakeUpstream
from tests.conftest import free_port, require_service
from tests.databases import delete_keys, gateway_database, redis_prefix, run_key_patterns

ROOT = Path(__file__).resolve().parents[2]
# Screenshots and other files a run keeps for a reader (git ignores the directory).
ARTIFACTS = Path(os.environ.get("OMNIROUTE_TEST_ARTIFACTS") or ROOT / "test-artifacts")
UPSTREAM_SECRET = "sk-upstream-e2e-SECRET-0123456789"
READ_TIMEOUT_SECONDS = 1.5
MAX_BODY_BYTES = 64 * 1024
POSTGRES = os.environ.get("CI_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("CI_REDIS_URL", "redis://127.0.0.1:6379/15")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

pytestmark = pytest.mark.e2e


def manage(*args: str, env: dict[str, str]) -> str:
    argv = [sys.executable, str(ROOT / "manage.py"), *args]
    return subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout


def _gateway_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMNIROUTE_DATA_DIR=str(data_dir),
        OMNIROUTE_DEBUG="0",
        OMNIROUTE_SECRET_KEY="e2e-" + secrets.token_hex(16),
        OMNIROUTE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        OMNIROUTE_UPSTREAM_READ_TIMEOUT=str(READ_TIMEOUT_SECONDS),
        OMNIROUTE_MAX_BODY_BYTES=str(MAX_BODY_BYTES),
        OMNIROUTE_REDIS_PREFIX=redis_prefix("e2e"),
        OMNIROUTE_LOG_LEVEL="WARNING",
        # A loaded 2-core CI machine can queue a healthy Redis call past the 50 ms default and
        # trip the store's fallback for a second; these tests are not about that timeout (the
        # outage test kills Redis outright).
        OMNIROUTE_STORE_TIMEOUT_MS="250",
        # The production default, which the test suite's own process turns off.
        OMNIROUTE_REQUEST_LOG="1",
        OMNIROUTE_REQUEST_LOG_PROCESS="1",
    )
    return env


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway exited with {process.returncode}")
        try:
            httpx.get(f"{url}/v1/models", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"the gateway did not answer within {timeout} s")


@dataclass
class Gateway:
    """A running gateway and an operator client for its management API."""

    url: str
    manage_key: str
    pid: int = 0  # the gateway process's
    api: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        headers = {"authorization": f"Bearer {self.manage_key}"}
        self.api = httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = self.api.post(path, json=payload)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def client(self, key: str, timeout: float = 10) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.url}/v1", headers={"authorization": f"Bearer {key}"}, timeout=timeout
        )


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream().start() as upstream:
        yield upstream


def prepare_gateway(data_dir: Path, **overrides: str) -> tuple[dict[str, str], str]:
    """Migrate a gateway database in ``data_dir`` (under a PostgreSQL DATABASE_URL: a new
    database, which every process started with the returned environment shares); return the
    environment and an operator key."""
    try:
        env = gateway_database({**_gateway_env(data_dir), **overrides})
    except psycopg.OperationalError as error:
        require_service("PostgreSQL (DATABASE_URL)", error)
    manage("migrate", "--noinput", "-v", "0", env=env)
    manage_key = manage("createapikey", "--name", "e2e-operator", "--scope", "manage", env=env)
    return env, manage_key.strip()


@contextmanager
def serving(env: dict[str, str], manage_key: str, *options: str) -> Iterator[Gateway]:
    """A gateway process (``manage.py serve`` with ``options``) on a free port for the
    duration of the block."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port), *options]
    process = subprocess.Popen(argv, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_serving(url, process)
        yield Gateway(url, manage_key, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=15)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    env, manage_key = prepare_gateway(tmp_path_factory.mktemp("gateway"))
    with serving(env, manage_key) as running:
        yield running


@pytest.fixture
def shared_services() -> Iterator[dict[str, str]]:
    """PostgreSQL (``prepare_gateway`` makes the gateways' own database on it) and Redis under
    a prefix of this test's, whose keys are deleted afterwards: the environment of several
    gateway processes sharing their state."""
    store = redis.Redis.from_url(REDIS, socket_connect_timeout=3)
    try:
        store.ping()
    except redis.RedisError as error:
        require_service("Redis", error)
    prefix = redis_prefix("procs")
    try:
        yield {"DATABASE_URL": POSTGRES, "REDIS_URL": REDIS, "OMNIROUTE_REDIS_PREFIX": prefix}
    finally:
        delete_keys(REDIS, run_key_patterns(prefix))
        store.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium."""
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        require_service("Chromium", FileNotFoundError("chromium or chromedriver (make browser)"))
    assert binary is not None and driver is not None
    options = Options()
    options.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


@dataclass
class Route:
    """One test's provider, its connections (in priority order) and a client key."""

    provider: str
    connections: list[int]
    key: str

    def model(self, name: str = "gpt-test") -> str:
        return f"{self.provider}/{name}"


def make_route(
    gateway: Gateway,
    fake: FakeUpstream,
    *scenarios: dict[str, Any],
    models: list[str] | None = None,
    category: str = "api_key",
    disable_cooling: bool = False,
    wire_format: str = "openai",
    served_models: list[str] | None = None,
    connection_fields: Sequence[Mapping[str, Any]] = (),
) -> Route:
    """A fresh provider with one connection per scenario (fake upstream knobs), and a key.

    ``connection_fields``: more fields of the n-th connection (``max_concurrent``,
    ``rate_limit_protection``, ``rate_limit_overrides``...), in the order of the scenarios."""
    slug = f"e2e-{secrets.token_hex(4)}"
    gateway.post(
        "/api/providers/",
        {
            "slug": slug,
            "name": slug,
            "category": category,
            "base_url": fake.base_url(),
            "wire_format": wire_format,
        },
    )
    ids = []
    for priority, knobs in enumerate(scenarios or ({},), start=1):
        connection = gateway.post(
            "/api/connections/",
            {
                "provider": slug,
                "name": f"c{priority}",
                "priority": priority,
                "base_url": scenario_url(fake, slug, priority, knobs),
                "secret": UPSTREAM_SECRET,
                "disable_cooling": disable_cooling,
                "served_models": served_models or [],
                **(connection_fields[priority - 1] if priority <= len(connection_fields) else {}),
            },
        )
        ids.append(connection["id"])
    allowed = models if models is not None else [f"{slug}/*"]
    key = gateway.post("/api/keys/", {"name": f"{slug}-client", "allowed_models": allowed})
    return Route(slug, ids, key["key"])


def scenario_url(fake: FakeUpstream, slug: str, index: int, knobs: dict[str, Any]) -> str:
    # The fake applies the knobs after /s/ and ignores the rest of the path up to
    # /chat/completions, so the path also tells which test and connection a request came from.
    return f"{fake.url}/s/{urlencode(knobs or {'chunk_size': 8})}/r/{slug}/c{index}/v1"


def records(
    fake: FakeUpstream, route: Route, connection: int | None = None, path: str = "/completions"
) -> list[Any]:
    """The fake's records of requests to ``path`` (chat completions unless told) from this
    route (or from its n-th connection)."""
    marker = f"/r/{route.provider}/" + (f"c{connection}/" if connection else "")
    return [r for r in fake.requests if marker in r.path and r.path.endswith(path)]
