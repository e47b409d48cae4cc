"""The gateway's operator surface outside the /v1 proxy: the start-up line, one handler for
every log record (no warning twice), ``/metrics`` across processes, and ``/healthz``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from omniroute.flowcontrol import FlowControlledServer, listening_url

pytestmark = pytest.mark.django_db

COUNT_IN_ANOTHER_PROCESS = """
from prometheus_client import Counter
Counter("omniroute_requests", "", ["endpoint", "status"]).labels("/v1/messages", "200").inc(3)
"""


class _Host:
    host, port = "0.0.0.0", 8123


class _Port:
    def getHost(self) -> _Host:  # Twisted's name
        return _Host()


def test_the_start_up_line_says_where_the_gateway_listens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omniroute.server")
    server: Any = object.__new__(FlowControlledServer)  # only what listen_success reads
    server.listening_addresses = []

    server.listen_success(_Port())

    assert [r.getMessage() for r in caplog.records if r.name == "omniroute.server"] == [
        "gateway listening on http://0.0.0.0:8123"
    ]


def test_an_ipv6_address_is_bracketed() -> None:
    assert listening_url("::1", 8000) == "http://[::1]:8000"


@pytest.mark.parametrize("name", ["django.request", "django.server", "routing.proxy.shell"])
def test_every_record_reaches_one_console_handler(name: str) -> None:
    """Django's default configuration gave ``django`` a console handler of its own, on top of
    the root's: each of its warnings was printed twice."""
    handlers = []
    logger: logging.Logger | None = logging.getLogger(name)
    while logger is not None:
        handlers += [h for h in logger.handlers if type(h) is logging.StreamHandler]
        logger = logger.parent if logger.propagate else None
    assert len(handlers) == 1


def test_metrics_add_up_every_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given: another gateway process counted three requests in the shared directory
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", COUNT_IN_ANOTHER_PROCESS], env=env, check=True)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    # when
    response = Client().get("/metrics")

    # then
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    [sample] = families["omniroute_requests"].samples
    assert (sample.labels, sample.value) == ({"endpoint": "/v1/messages", "status": "200"}, 3.0)
    assert "omniroute_breakers" in families  # the state-store gauges are there too


def test_metrics_answer_only_get() -> None:
    assert Client().post("/metrics").status_code == 405


def test_metrics_need_the_bearer_token_when_one_is_set(settings: Any) -> None:
    settings.METRICS_TOKEN = "scrape-token-0123456789"
    for presented in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "x"}):
        refused = Client().get("/metrics", headers=presented)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_metrics_token"
        assert refused["WWW-Authenticate"] == "Bearer"
        assert b"omniroute_" not in refused.content
    served = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-0123456789")
    assert served.status_code == 200
    assert b"# TYPE" in served.content
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 200


def test_liveness_needs_nothing_but_the_process() -> None:
    response = Client(HTTP_AUTHORIZATION="Bearer sk-stale-key").get("/healthz")

    assert (response.status_code, response.json()) == (200, {"status": "alive"})
