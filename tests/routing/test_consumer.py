"""The /v1 consumers in process, against an ``httpx.MockTransport`` upstream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async
from django.db.backends.utils import CursorWrapper
from pytest_django.fixtures import Settings

from omniroute.core import tasks
from resilience.services.housekeeping import housekeeping_settle
from routing.models import Combo, Provider, ProviderConnection
from routing.proxy.consumers import ChatCompletionsConsumer, ModelsConsumer, ProxyConsumer
from routing.services import combo_save
from tests.routing.conftest import UPSTREAM_SECRET
from tests.routing.harness import (
    COMPLETION,
    Behaviour,
    FakeUpstream,
    Reply,
    add_connection,
    answer,
    asgi_app,
    chunks_of,
    communicator,
    raising,
    read_reply,
    send_body,
    unread,
)
from tests.routing.harness import chat as chat_body

# The snapshot is built through database_sync_to_async (another thread), hence transactions;
# these tests run on the process store (no fake clock: nothing here waits out a cooldown).
pytestmark = pytest.mark.django_db(transaction=True)

BACKUP_SECRET = "sk-upstream-BACKUP-0987654321"
FRESH_SECRET = "sk-upstream-FRESH-1122334455"
RECEIVE_TIMEOUT_SECONDS = 2  # the query guard test waits it out
SSE = {"content-type": "text/event-stream"}
CHUNKS = [  # each chunk carries a token: the relay holds nothing back after the first
    b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


# --- upstream behaviours (FakeUpstream, unread and friends: tests/routing/harness.py) -------


async def ok(request: httpx.Request) -> httpx.Response:
    """A completion, streamed when the request asks for it."""
    if orjson.loads(request.content).get("stream"):
        return httpx.Response(200, headers=SSE, content=chunks_of(CHUNKS))
    return unread(200, orjson.dumps(COMPLETION))


def streaming(chunks: AsyncIterator[bytes]) -> Behaviour:
    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=chunks)

    return behaviour


unavailable = answer(503, b"upstream overloaded")
bad_request = answer(
    400,
    orjson.dumps(
        {"error": {"message": "bad temperature", "type": "invalid_request_error", "code": "x"}}
    ),
)
refuse = raising(httpx.ConnectError, "connection refused")
time_out = raising(httpx.ReadTimeout, "read timed out")


# --- ASGI driving ---------------------------------------------------------------------------


async def call(
    fake: Any,
    key: str,
    body: bytes,
    *,
    consumer: type[ProxyConsumer] = ChatCompletionsConsumer,
    **request: Any,
) -> Reply:
    """One request to ``consumer`` over ``fake`` on the process store; its whole reply."""
    comm = communicator(asgi_app(fake, consumer=consumer), key, **request)
    await send_body(comm, body)
    return await read_reply(comm, RECEIVE_TIMEOUT_SECONDS)


def chat(*, model: str = "mock/gpt-x", stream: bool = False, content: str = "hi") -> bytes:
    return chat_body(model, stream=stream, content=content)


@contextmanager
def no_queries() -> Iterator[None]:
    """Every SQL statement, in any thread, fails the test."""
    refuse = AssertionError("the hot path queried the database")
    with (
        patch.object(CursorWrapper, "execute", side_effect=refuse),
        patch.object(CursorWrapper, "executemany", side_effect=refuse),
    ):
        yield


# --- fixtures (``fresh_snapshot``, ``provider``, ``connection``, ``plain_key``: conftest) ---


@pytest.fixture
def backup(provider: Provider, connection: ProviderConnection) -> int:
    """The id of a second connection, tried after ``connection``."""
    return add_connection(provider, "backup", BACKUP_SECRET, priority=200)


@pytest.fixture
def catalog(provider: Provider) -> None:
    """A connection declaring two models, and a combo over one of them."""
    add_connection(provider, "declared", UPSTREAM_SECRET, served_models=["gpt-x", "gpt-y"])
    combo_save(
        combo=Combo(),
        fields={"name": "team-fast"},
        targets=[{"provider": provider, "model": "gpt-x"}],
    )


# --- chat completions -----------------------------------------------------------------------


async def test_non_stream_reply_is_relayed_with_only_gateway_headers_upstream(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    fake = FakeUpstream({UPSTREAM_SECRET: ok})
    client_headers = [(b"x-api-key", b"sk-extra"), (b"x-session-id", b"s1"), (b"cookie", b"c=1")]

    reply = await call(fake, plain_key, chat(), extra_headers=client_headers)

    assert (reply.status, reply.json()) == (200, COMPLETION)
    assert reply.headers["x-omniroute-request-id"]
    assert reply.decision()["connection"] == str(connection.pk)
    (sent,) = fake.requests
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_SECRET}"
    assert orjson.loads(sent.content)["model"] == "gpt-x"
    assert not {"x-api-key", "x-session-id", "cookie"} & set(sent.headers.keys())
    assert plain_key.encode() not in repr(sent.headers.raw).encode()


async def test_stream_relays_each_chunk_as_its_own_body_event(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    fake = FakeUpstream({UPSTREAM_SECRET: ok})

    reply = await call(fake, plain_key, chat(stream=True))

    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.chunks == [*CHUNKS, b""]
    assert "x-omniroute-decision" in reply.headers


@pytest.mark.parametrize(
    ("failure", "tries"),
    [(unavailable, 2), (refuse, 1), (time_out, 1)],
    ids=["unavailable", "refuse", "time_out"],
)
async def test_failover_to_the_next_connection(
    fresh_snapshot: None, backup: int, plain_key: str, failure: Behaviour, tries: int
) -> None:
    # The attempt policy: a 5xx is retried once on its target (after a short backoff); a
    # refused connection or a timeout moves on at once while another target is left.
    fake = FakeUpstream({UPSTREAM_SECRET: failure, BACKUP_SECRET: ok})

    reply = await call(fake, plain_key, chat())

    assert (reply.status, reply.json()) == (200, COMPLETION)
    assert reply.decision()["connection"] == str(backup)
    assert reply.decision()["attempts"] == str(tries + 1)
    assert fake.calls == [UPSTREAM_SECRET] * tries + [BACKUP_SECRET]


async def test_a_client_error_is_relayed_without_failover(
    fresh_snapshot: None, backup: int, plain_key: str
) -> None:
    fake = FakeUpstream({UPSTREAM_SECRET: bad_request, BACKUP_SECRET: ok})

    reply = await call(fake, plain_key, chat())

    assert reply.status == 400
    assert reply.json()["error"]["message"] == "bad temperature"
    assert fake.calls == [UPSTREAM_SECRET]


async def test_the_query_guard_catches_a_cold_snapshot_build(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    """Shows ``no_queries`` works across threads, so the next test can trust it."""
    fake = FakeUpstream({UPSTREAM_SECRET: ok})

    with no_queries(), patch("routing.proxy.shell.logger") as log:
        reply = await call(fake, plain_key, chat())
    # The guard's AssertionError reached the consumer, which answered a JSON 500 and logged it.
    assert reply.status == 500 and reply.json()["error"]["code"] == "internal_error"
    log.exception.assert_called_once()


@pytest.mark.parametrize("stream", [False, True])
async def test_hot_path_makes_no_query_and_sees_config_changes(
    fresh_snapshot: None,
    provider: Provider,
    connection: ProviderConnection,
    plain_key: str,
    stream: bool,
) -> None:
    # given: a request built the snapshot, and what it left running in the background (its
    # write-through, a chore that came due) has ended: none of it is the next request's
    fake = FakeUpstream({UPSTREAM_SECRET: ok, FRESH_SECRET: ok})
    for _ in range(2):
        assert (await call(fake, plain_key, chat())).status == 200
        await tasks.flush()
        await housekeeping_settle()
    # when / then: the next one reads no database
    with no_queries():
        warm = await call(fake, plain_key, chat(stream=stream))
    assert warm.status == 200
    assert warm.decision()["connection"] == str(connection.pk)
    # when: an operator adds a connection tried first; then: the next request uses it
    fresh = await database_sync_to_async(add_connection)(
        provider, "fresh", FRESH_SECRET, priority=1
    )
    after = await call(fake, plain_key, chat(stream=stream))
    assert after.decision()["connection"] == str(fresh)
    assert fake.calls[-1] == FRESH_SECRET


async def test_client_disconnect_cancels_the_upstream_stream(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    never, finished = asyncio.Event(), asyncio.Event()

    async def hanging() -> AsyncIterator[bytes]:
        try:
            yield CHUNKS[0]
            await never.wait()
            yield CHUNKS[1]
        finally:
            finished.set()

    app = asgi_app(FakeUpstream({UPSTREAM_SECRET: streaming(hanging())}))
    comm = communicator(app, plain_key)
    await send_body(comm, chat(stream=True))
    assert (await comm.receive_output(RECEIVE_TIMEOUT_SECONDS))["status"] == 200
    first = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)
    assert (first["body"], first["more_body"], finished.is_set()) == (CHUNKS[0], True, False)

    await comm.send_input({"type": "http.disconnect"})

    await asyncio.wait_for(finished.wait(), RECEIVE_TIMEOUT_SECONDS)
    await comm.wait(RECEIVE_TIMEOUT_SECONDS)


async def test_upstream_breaking_mid_stream_ends_with_an_error_event(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str
) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield CHUNKS[0]
        raise httpx.ReadError("connection reset by peer")

    fake = FakeUpstream({UPSTREAM_SECRET: streaming(broken())})

    reply = await call(fake, plain_key, chat(stream=True))

    assert reply.status == 200
    first, event, last = reply.chunks
    assert first == CHUNKS[0]
    assert event.startswith(b"data: ") and b"upstream_stream_interrupted" in event
    assert last == b""


@pytest.mark.parametrize(("size", "status", "upstream_calls"), [(1800, 200, 1), (3000, 413, 0)])
async def test_body_limit_counts_every_part(
    fresh_snapshot: None,
    connection: ProviderConnection,
    plain_key: str,
    settings: Settings,
    size: int,
    status: int,
    upstream_calls: int,
) -> None:
    settings.MAX_BODY_BYTES = 2048
    fake = FakeUpstream({UPSTREAM_SECRET: ok})
    body = chat(content="x" * (size - len(chat(content=""))))
    assert len(body) == size
    comm = communicator(asgi_app(fake), plain_key)

    half = size // 2
    await comm.send_input({"type": "http.request", "body": body[:half], "more_body": True})
    await comm.send_input({"type": "http.request", "body": body[half:], "more_body": False})
    reply = await read_reply(comm, RECEIVE_TIMEOUT_SECONDS)

    assert reply.status == status
    assert len(fake.requests) == upstream_calls
    if status == 413:
        assert reply.json()["error"]["code"] == "request_too_large"


# --- models ---------------------------------------------------------------------------------


async def call_models(key: str, method: str) -> Reply:
    return await call(
        FakeUpstream({}), key, b"", consumer=ModelsConsumer, method=method, path="/v1/models"
    )


async def test_models_lists_declared_models_and_combos(
    fresh_snapshot: None, catalog: None, plain_key: str
) -> None:
    reply = await call_models(plain_key, "GET")

    assert reply.status == 200
    body = reply.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["mock/gpt-x", "mock/gpt-y", "team-fast"]


async def test_models_refuses_post(fresh_snapshot: None, catalog: None, plain_key: str) -> None:
    reply = await call_models(plain_key, "POST")

    assert (reply.status, reply.headers["allow"]) == (405, "GET")
    assert reply.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_built_already_read_is_relayed_too(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str, stream: bool
) -> None:
    # MockTransport handlers naturally build read responses; real transports never do.
    def fake(request: httpx.Request) -> httpx.Response:
        if stream:
            return httpx.Response(200, content=CHUNKS[1] + CHUNKS[2])
        return httpx.Response(503, text="upstream overloaded", headers={"retry-after": "40"})

    reply = await call(fake, plain_key, chat(stream=stream))
    if stream:
        assert reply.status == 200 and b"".join(reply.chunks) == CHUNKS[1] + CHUNKS[2]
    else:
        assert reply.status == 503 and reply.headers["retry-after"] == "40"
        assert "upstream overloaded" in reply.json()["error"]["message"]


async def test_the_nesting_limit_is_the_setting(
    fresh_snapshot: None, connection: ProviderConnection, plain_key: str, settings: Settings
) -> None:
    settings.MAX_JSON_DEPTH = 4
    fake = FakeUpstream({UPSTREAM_SECRET: ok})
    nested = orjson.loads(chat())
    nested["metadata"] = [[["x"]]]  # four levels with the body's own object

    assert (await call(fake, plain_key, orjson.dumps(nested))).status == 200
    nested["metadata"] = [[[["x"]]]]
    refused = await call(fake, plain_key, orjson.dumps(nested))

    assert refused.status == 400
    assert refused.json()["error"]["code"] == "json_too_deep"
    assert len(fake.requests) == 1  # the refused body never went upstream
