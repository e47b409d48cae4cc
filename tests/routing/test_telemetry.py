"""What the /v1 proxy tells operators: one access-log line per request (request id, key
prefix, model, target, status, attempts, latency, bytes; no secret, no lease header) and the
request counters that ``/metrics`` exposes, parsed as Prometheus would.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from leases.domain.tokens import OWNER_HEADER
from omniroute.core.logging import JsonFormatter, ScrubbingFilter
from omniroute.core.scrub import REDACTED
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.models import ProviderConnection
from routing.proxy.consumers import NotFoundConsumer
from routing.proxy.telemetry import AccessRecord, targets_tried
from tests.routing.auto_support import target
from tests.routing.conftest import UPSTREAM_SECRET
from tests.routing.harness import (
    COMPLETION,
    answer,
    asgi_app,
    chunks_of,
    communicator,
    read_reply,
    send_body,
)
from tests.routing.harness import chat as chat_body

pytestmark = pytest.mark.django_db(transaction=True)

OWNER_TOKEN = "vlo_" + "A" * 43  # a lease header value: it must never reach the log
ACCESS_LOGGER = "omniroute.access"
RECEIVE_SECONDS = 5


async def send(key: str, *, consumer: type = NotFoundConsumer, path: str = "/v1/nowhere") -> str:
    """One request; the request id the gateway answered with."""
    ok = answer(200, json.dumps(COMPLETION).encode())
    app = asgi_app(ok) if path.endswith("completions") else asgi_app(ok, consumer=consumer)
    comm = communicator(app, key, path=path, extra_headers=[(OWNER_HEADER, OWNER_TOKEN.encode())])
    await send_body(comm, chat_body("mock/gpt-x"))
    reply = await read_reply(comm)
    return reply.headers["x-omniroute-request-id"]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The access record's fields, as the JSON formatter reads them."""
    found: dict[str, Any] = record.__dict__["fields"]
    return found


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name`` in an exposition, by their sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def test_metrics_count_exactly_the_requests_sent(
    request_metrics: None, fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    # given: two answered chat completions and one unknown path
    for _ in range(2):
        await send(plain_key, path="/v1/chat/completions")
    await send(plain_key)

    # when
    text = (await sync_to_async(Client().get)("/metrics")).content.decode()

    # then
    requests = samples(text, "omniroute_requests_total")
    chat = (("endpoint", "/v1/chat/completions"), ("model", "other"), ("provider", "mock"))
    unmatched = (("endpoint", "unmatched"), ("model", "none"), ("provider", "none"))
    assert requests == {
        (*chat, ("status", "200"), ("status_class", "2xx")): 2.0,
        (*unmatched, ("status", "404"), ("status_class", "4xx")): 1.0,
    }
    attempts = samples(text, "omniroute_upstream_attempts_total")
    assert attempts == {(("outcome", "success"), ("provider", "mock")): 2.0}
    latency = samples(text, "omniroute_request_duration_seconds_count")
    assert latency == {chat: 2.0, unmatched: 1.0}


async def test_the_access_line_carries_the_request_id_and_no_secret(
    request_metrics: None,
    fresh_snapshot: None,
    connection: ProviderConnection,
    plain_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    request_id = await send(plain_key, path="/v1/chat/completions")

    [record] = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    line = record.getMessage()
    assert f"request_id={request_id}" in line
    assert "model=mock/gpt-x" in line and "status=200" in line and "attempts=1" in line
    assert f"key={plain_key[:6]}" in line  # the display prefix only
    for secret in (plain_key, UPSTREAM_SECRET, OWNER_TOKEN):
        assert secret not in caplog.text
    assert fields(record)["target"] == "mock/gpt-x" and fields(record)["bytes"] > 0
    assert line.endswith(" error=-")  # nothing went wrong


async def test_the_json_access_line(
    request_metrics: None,
    fresh_snapshot: None,
    connection: ProviderConnection,
    plain_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    request_id = await send(plain_key, path="/v1/chat/completions")

    [record] = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["logger"], entry["level"], entry["request_id"]) == (
        ACCESS_LOGGER,
        "INFO",
        request_id,
    )
    assert (entry["status"], entry["attempts"], entry["target"]) == (200, 1, "mock/gpt-x")
    assert plain_key.startswith(entry["key"]) and len(entry["key"]) < len(plain_key)
    assert plain_key not in json.dumps(entry) and OWNER_TOKEN not in json.dumps(entry)


async def test_a_client_that_never_authenticates_is_logged_without_a_key(
    request_metrics: None, plain_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    await send(plain_key)

    [record] = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    assert (fields(record)["key"], fields(record)["status"]) == ("-", 404)


@pytest.mark.parametrize(
    ("tried", "count"),
    [
        ([], 0),
        ([(1, "m")], 1),
        ([(1, "m"), (1, "m")], 1),  # a retry on the same target is not a fail-over
        ([(1, "m"), (2, "m")], 2),  # the same model on another connection is
        ([(1, "m"), (1, "n")], 2),  # another model on the same connection too
    ],
)
def test_targets_tried_counts_distinct_targets(tried: list[tuple[int, str]], count: int) -> None:
    failed = Outcome(OutcomeKind.HTTP_ERROR, 503)
    attempts = [(target(connection, model=model), failed) for connection, model in tried]
    assert targets_tried(attempts) == count
    record = AccessRecord("r", "POST", "/v1/x", "k", "m", "-", 200, len(tried), 1, 0, count)
    assert record.failed_over is (count > 1)


async def test_a_client_that_leaves_before_its_body_arrived_is_counted_once(
    request_metrics: None, fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    comm = communicator(asgi_app(answer(200, json.dumps(COMPLETION).encode())), plain_key)
    await comm.send_input({"type": "http.request", "body": b'{"model"', "more_body": True})
    await comm.send_input({"type": "http.disconnect"})
    await comm.wait(RECEIVE_SECONDS)

    text = (await sync_to_async(Client().get)("/metrics")).content.decode()
    labels = (("endpoint", "/v1/chat/completions"), ("model", "none"), ("provider", "none"))
    assert samples(text, "omniroute_requests_total") == {
        (*labels, ("status", "499"), ("status_class", "4xx")): 1.0
    }


USAGE_STREAM = [
    b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
    b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}\n\n',
    b"data: [DONE]\n\n",
]


async def test_a_stream_s_usage_block_counts_its_tokens(
    request_metrics: None, fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    async def streaming(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=chunks_of(USAGE_STREAM))

    comm = communicator(asgi_app(streaming), plain_key)
    await send_body(comm, chat_body("mock/gpt-x", stream=True))
    assert (await read_reply(comm)).status == 200
    await comm.wait(RECEIVE_SECONDS)  # the consumer is done: the request is counted

    text = (await sync_to_async(Client().get)("/metrics")).content.decode()
    labels = (("model", "other"), ("provider", "mock"))
    assert samples(text, "omniroute_tokens_total") == {
        (("direction", "in"), *labels): 7.0,
        (("direction", "out"), *labels): 3.0,
    }


async def access_record(key: str, model: str, caplog: pytest.LogCaptureFixture) -> Any:
    """The access record of one chat completion asking for ``model`` (the access log at INFO)."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    comm = communicator(asgi_app(answer(200, json.dumps(COMPLETION).encode())), key)
    await send_body(comm, chat_body(model))
    await read_reply(comm)
    [record] = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    return record


async def test_a_hostile_model_name_is_clipped_and_cannot_forge_a_line(
    request_metrics: None,
    fresh_snapshot: None,
    connection: ProviderConnection,
    plain_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = "mock/x\nstatus=200\tforged=1" + "m" * 100_000

    record = await access_record(plain_key, model, caplog)

    line = record.getMessage()
    assert "\n" not in line and len(line) < 1000
    assert fields(record)["model"].endswith("...") and len(fields(record)["model"]) == 256


@pytest.mark.usefixtures("request_metrics", "fresh_snapshot", "connection")
async def test_a_credential_shaped_model_name_is_redacted_in_the_access_line(
    plain_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    leaked = "sk-abcdefghijklmnop1234"  # a client that sends a key where the model goes

    record = await access_record(plain_key, f"mock/{leaked}", caplog)

    # The line and its fields hold no key, before and after the console handler's filter.
    assert fields(record)["model"] == f"mock/{REDACTED}"
    assert ScrubbingFilter().filter(record)
    entry = JsonFormatter().format(record)
    for text in (record.getMessage(), entry, logging.Formatter().format(record)):
        assert leaked not in text and REDACTED in text
