"""OpenTelemetry traces of the /v1 proxy (docs/configuration.md, ``OTEL_EXPORTER_OTLP_ENDPOINT``):
one span per request, its parent the client's ``traceparent``; one child span per upstream
attempt; the request span's ``traceparent`` upstream; nothing at all when tracing is off."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from omniroute.core.observability.tracing import tracing_configure, tracing_use
from routing.models import Provider
from tests.routing.conftest import UPSTREAM_SECRET
from tests.routing.harness import (
    COMPLETION,
    FakeUpstream,
    add_connection,
    asgi_app,
    communicator,
    raising,
    read_reply,
    send_body,
    unread,
)
from tests.routing.harness import chat as chat_body

pytestmark = pytest.mark.django_db(transaction=True)

BACKUP_SECRET = "sk-upstream-BACKUP-0987654321"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


async def ok(request: httpx.Request) -> httpx.Response:
    return unread(200, orjson.dumps(COMPLETION))


refuse = raising(httpx.ConnectError, "connection refused")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory; off again after."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing_use(provider)
    yield exporter
    tracing_configure("")


@pytest.fixture
def backup(provider: Provider, connection: object) -> int:
    return add_connection(provider, "backup", BACKUP_SECRET, priority=200)


async def test_a_failed_over_request_is_one_span_with_two_attempt_spans(
    spans: InMemorySpanExporter, fresh_snapshot: None, backup: int, plain_key: str
) -> None:
    # given: the first connection refuses, the backup answers; the client sent a traceparent
    fake = FakeUpstream({UPSTREAM_SECRET: refuse, BACKUP_SECRET: ok})
    app = asgi_app(fake)
    comm = communicator(app, plain_key, extra_headers=[(b"traceparent", TRACEPARENT.encode())])

    # when
    await send_body(comm, chat_body("mock/gpt-x"))
    reply = await read_reply(comm)
    await comm.wait(5)  # the consumer is done: the request and its spans are finished

    # then
    assert reply.status == 200
    found = list(spans.get_finished_spans())
    [request] = [s for s in found if s.name == "POST /v1/chat/completions"]
    attempts = sorted((s for s in found if s is not request), key=lambda s: s.start_time or 0)
    assert len(found) == 3 and len(attempts) == 2
    assert request.parent is not None and request.parent.is_remote
    assert f"{request.context.trace_id:032x}" == CLIENT_TRACE
    assert f"{request.parent.span_id:016x}" == CLIENT_SPAN
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["omniroute.attempts"] == 2
    for attempt in attempts:
        assert attempt.parent is not None
        assert attempt.parent.span_id == request.context.span_id
        assert attempt.context.trace_id == request.context.trace_id
    first, second = (dict(a.attributes or {}) for a in attempts)
    assert first["omniroute.target"] == "mock/gpt-x"
    assert first["omniroute.outcome"] == "network_error"
    assert first["omniroute.result"] == "failed_over"
    assert first["omniroute.reason"] == "ConnectError"  # the transport's failure
    assert first["omniroute.hedge"] is False
    assert second["omniroute.outcome"] == "success"
    assert second["omniroute.result"] == "success"
    assert second["http.response.status_code"] == 200
    assert second["omniroute.connection_id"] == backup
    # every upstream request carried the request span's traceparent
    parent = f"00-{CLIENT_TRACE}-{request.context.span_id:016x}-01"
    assert [r.headers.get("traceparent") for r in fake.requests] == [parent, parent]


async def test_without_tracing_nothing_is_traced_or_passed_upstream(
    fresh_snapshot: None, backup: int, plain_key: str
) -> None:
    tracing_configure("")
    fake = FakeUpstream({UPSTREAM_SECRET: ok, BACKUP_SECRET: ok})
    comm = communicator(
        asgi_app(fake), plain_key, extra_headers=[(b"traceparent", TRACEPARENT.encode())]
    )
    await send_body(comm, chat_body("mock/gpt-x"))

    assert (await read_reply(comm)).status == 200
    [sent] = fake.requests
    assert "traceparent" not in sent.headers


def test_with_the_variable_unset_no_tracer_or_exporter_is_loaded() -> None:
    # (redis-py imports OpenTelemetry's API and metrics on its own when they are installed)
    script = (
        "import sys, django; django.setup()\n"
        "from omniroute.core.observability.tracing import start_request\n"
        "assert start_request('POST /v1/x', [(b'traceparent', b'x')]) is None\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace',"
        " 'opentelemetry.exporter'))]\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": ""}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
