"""Nothing secret leaves, over real HTTP.

An upstream 400, 403 and 500 whose error message quotes the connection's own key and a
``Bearer sk-…`` string: the client's body, the connection's ``last_error`` (management API) and
the gateway's log output hold neither. The gateway here is a process of its own, started with
its stderr/stdout captured to a file at DEBUG level, so the log part can be checked.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.conftest import free_port
from tests.e2e.conftest import (
    ROOT,
    UPSTREAM_SECRET,
    Gateway,
    _wait_until_serving,
    prepare_gateway,
)

pytestmark = pytest.mark.e2e

# Not shaped like any credential: only the connection's own secret can find it.
UNSHAPED_SECRET = "e2e-own-credential-0123456789"
BEARER = "Bearer sk-live-abcdefghijklmnop0123456789"
STATUSES = {400: "content_policy_violation", 403: "permission_denied", 500: "server_error"}
# How long to wait for a background write of last_error: the 403's surely comes.
RECORDED_WAIT_SECONDS = {400: 1.0, 403: 5.0, 500: 1.0}


class LoggedGateway(Gateway):
    """A gateway whose process output goes to ``log``."""

    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def logged_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedGateway]:
    data_dir = tmp_path_factory.mktemp("secrets-gateway")
    env, manage_key = prepare_gateway(data_dir, OMNIROUTE_LOG_LEVEL="DEBUG")
    log = data_dir / "gateway.log"
    port = free_port()
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_until_serving(url, process)
            gateway = LoggedGateway(url, manage_key)
            gateway.log = log
            yield gateway
        finally:
            process.terminate()
            process.wait(timeout=15)


def one_connection(gateway: Gateway, fake: FakeUpstream, secret: str) -> tuple[str, int, str]:
    """A fresh provider with one connection holding ``secret``: (slug, connection id, key)."""
    slug = f"e2e-{secrets.token_hex(4)}"
    gateway.post(
        "/api/providers/",
        {"slug": slug, "name": slug, "category": "api_key", "base_url": fake.base_url()},
    )
    connection = gateway.post(
        "/api/connections/",
        {"provider": slug, "name": "only", "priority": 1, "secret": secret},
    )
    key = gateway.post("/api/keys/", {"name": f"{slug}-client", "allowed_models": [f"{slug}/*"]})
    return slug, connection["id"], key["key"]


def leaking_body(status: int, secret: str) -> str:
    message = f"Incorrect API key provided: {secret}. You sent Authorization: {BEARER}."
    error = {"message": message, "type": "invalid_request_error", "code": STATUSES[status]}
    return orjson.dumps({"error": error}).decode()


def last_error(gateway: Gateway, connection: int, wait_seconds: float) -> str:
    """The connection's ``last_error`` once written (the write may run in the background)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        state: dict[str, Any] = gateway.api.get(f"/api/connections/{connection}/").json()
        if state.get("last_error") or time.monotonic() > deadline:
            return str(state.get("last_error") or "")
        time.sleep(0.1)


def assert_no_secret(text: str, secret: str) -> None:
    assert secret not in text
    assert "sk-live-" not in text


@pytest.mark.parametrize("secret", [UPSTREAM_SECRET, UNSHAPED_SECRET], ids=["sk", "unshaped"])
@pytest.mark.parametrize("status", list(STATUSES))
def test_an_upstream_error_quoting_the_key_leaks_it_nowhere(
    logged_gateway: LoggedGateway, fake: FakeUpstream, status: int, secret: str
) -> None:
    slug, connection, key = one_connection(logged_gateway, fake, secret)
    model = f"leak-{secrets.token_hex(4)}"  # per-model knobs: no other test sees them
    fake.set_model(model, status=status, body=leaking_body(status, secret))
    try:
        with logged_gateway.client(key) as client:
            body = {"model": f"{slug}/{model}", "messages": [{"role": "user", "content": "x"}]}
            response = client.post("/chat/completions", json=body)
    finally:
        fake.set_model(model)
    sent = [r for r in fake.requests if r.model == model]
    assert sent and sent[0].headers.get("authorization") == f"Bearer {secret}"

    # The client.
    assert response.status_code == status
    assert_no_secret(response.text, secret)
    assert "[redacted]" in response.json()["error"]["message"]

    # The connection's last_error, written by the attribution code (which scrubs it). A 403
    # (credential) marks the connection; a 400 records nothing and a 500 is
    # counted on the (connection, model) pair, so theirs may stay empty.
    recorded = last_error(logged_gateway, connection, RECORDED_WAIT_SECONDS[status])
    assert_no_secret(recorded, secret)
    if status == 403:
        assert recorded, "the 403 was never recorded as the connection's last_error"

    # The gateway's own output (DEBUG level, stdout and stderr).
    assert_no_secret(logged_gateway.output(), secret)


def test_the_log_capture_works(logged_gateway: LoggedGateway) -> None:
    """The log part above would pass vacuously if nothing reached the file."""
    httpx.get(f"{logged_gateway.url}/v1/models", timeout=5)  # 401: no key
    deadline = time.monotonic() + 5
    while not logged_gateway.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert logged_gateway.output(), "the gateway wrote nothing at DEBUG level"
