"""The in-process consumer harness shared by the ``test_consumer*`` modules.

A ``FakeUpstream`` behind an ``httpx.MockTransport`` answers by the connection secret each
request carries and records the requests; a ``FakeClock`` drives the store holding the
resilience state (a ``MemoryStore`` unless a test brings its own), so cooldowns and windows
pass without sleeping; a ``Gateway`` runs the chat consumer over both and reads its replies.
Plain helpers only: the fixtures that build them (``clock``, ``store``, ``gateway``, ``acme``,
...) live in ``conftest.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from channels.testing import ApplicationCommunicator

from omniroute.core.observability.requestlog.record import RequestRecord
from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import Breaker
from resilience.domain.connection_state import ConnectionState
from resilience.services.breakers import breaker_get
from resilience.services.connections import connection_state_get
from routing.models import Provider, ProviderConnection
from routing.proxy.consumers import ChatCompletionsConsumer, ProxyConsumer
from routing.proxy.upstream.client import Upstream
from routing.services import connection_save, provider_save

RECEIVE_TIMEOUT_SECONDS = 5
CHAT_PATH = "/v1/chat/completions"
ACME_MODEL = "acme/m1"
COMPLETION = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0}]}
# Failures are de-duplicated for 5 s per (provider, connection): a gap that clears it.
PAST_CONNECTION_DEDUP_SECONDS = 6.0

Behaviour = Callable[[httpx.Request], Awaitable[httpx.Response]]


# --- upstream behaviours --------------------------------------------------------------------


async def chunks_of(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def unread(status: int, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    """A JSON response left unread, as real transports return them.

    ``httpx.Response(status, json=...)`` comes back already read, and ``Upstream``'s error path
    (``aiter_raw``) then raises ``StreamConsumed``.
    """
    all_headers = {"content-type": "application/json", **(headers or {})}
    return httpx.Response(status, headers=all_headers, content=chunks_of([body]))


def answer(status: int, body: bytes, headers: dict[str, str] | None = None) -> Behaviour:
    """Answer ``status`` with ``body`` (and ``headers``), left unread."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return unread(status, body, headers)

    return behaviour


def error(
    status: int,
    message: str,
    code: str = "upstream_error",
    headers: dict[str, str] | None = None,
) -> Behaviour:
    """Answer ``status`` with an OpenAI-style error body (and ``headers``)."""
    return answer(status, orjson.dumps({"error": {"message": message, "code": code}}), headers)


def raising(exc: type[httpx.TransportError], message: str = "the upstream went away") -> Behaviour:
    """Fail at the transport, as a refused connection or a timeout does."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        raise exc(message, request=request)

    return behaviour


def gathering(count: int, then: Behaviour) -> Behaviour:
    """Hold each request until ``count`` have arrived, then answer them all with ``then``."""
    arrived, everyone = [0], asyncio.Event()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        arrived[0] += 1
        if arrived[0] >= count:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), RECEIVE_TIMEOUT_SECONDS)
        return await then(request)

    return behaviour


def in_turn(*behaviours: Behaviour) -> Behaviour:
    """Each request gets the next behaviour, in order."""
    answers = iter(behaviours)

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await next(answers)(request)

    return behaviour


def by_model(**behaviours: Behaviour) -> Behaviour:
    """Each request gets the behaviour of the upstream model it asks for."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await behaviours[orjson.loads(request.content)["model"]](request)

    return behaviour


# The two keys of ``acme`` that the ``primary`` and ``backup`` fixtures add (conftest).
PRIMARY = "sk-acme-PRIMARY-0001"
BACKUP = "sk-acme-BACKUP-0002"

OK = answer(200, orjson.dumps(COMPLETION))
UNAVAILABLE = error(503, "service unavailable")
RATE_LIMITED = error(429, "slow down", "rate_limit_exceeded")


def secret_of(request: httpx.Request) -> str:
    """The connection secret a request carries: ``x-api-key`` (Anthropic-format providers)
    or the Bearer token."""
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    return request.headers["authorization"].removeprefix("Bearer ")


@dataclass
class FakeUpstream:
    """Answers by the connection secret a request carries, and records every request."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.behaviours[secret_of(request)](request)

    @property
    def calls(self) -> list[str]:
        """The secrets asked, in order."""
        return [secret_of(request) for request in self.requests]

    @property
    def sent(self) -> list[tuple[str, str]]:
        """The (secret, upstream model) of each request, in order."""
        return [(secret_of(r), orjson.loads(r.content)["model"]) for r in self.requests]


@dataclass
class FakeClock:
    """The store's clock (epoch seconds); moves only when told."""

    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# --- driving a consumer ---------------------------------------------------------------------


@dataclass
class Reply:
    """What the client received: status, headers and each body event's bytes."""

    status: int
    headers: dict[str, str]
    chunks: list[bytes]

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return orjson.loads(self.body)

    def decision(self) -> dict[str, str]:
        parts = self.headers["x-omniroute-decision"].split("; ")
        return dict(part.split("=", 1) for part in parts)

    @property
    def connection(self) -> int | None:
        """The connection that answered, from the decision header."""
        decided = self.decision().get("connection")
        return int(decided) if decided is not None else None


def asgi_app(
    handler: Callable[[httpx.Request], Any],
    *,
    consumer: type[ProxyConsumer] = ChatCompletionsConsumer,
    store: StateStore | None = None,
) -> Any:
    """``consumer`` over ``handler`` as the upstream, on ``store`` (else the process store)."""
    upstream = Upstream(httpx.MockTransport(handler))
    if store is None:
        return consumer.as_asgi(upstream=upstream)
    return consumer.as_asgi(upstream=upstream, store=store)


def http_scope(
    key: str,
    *,
    method: str = "POST",
    path: str = CHAT_PATH,
    extra_headers: Sequence[tuple[bytes, bytes]] = (),
) -> dict[str, Any]:
    """The ASGI scope of an HTTP request authenticated by ``key``."""
    return {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {key}".encode()), *extra_headers],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


def communicator(
    app: Any,
    key: str,
    *,
    method: str = "POST",
    path: str = CHAT_PATH,
    extra_headers: Sequence[tuple[bytes, bytes]] = (),
) -> Any:
    """An HTTP request to ``app`` authenticated by ``key``, its body still to send."""
    scope = http_scope(key, method=method, path=path, extra_headers=extra_headers)
    return ApplicationCommunicator(app, scope)


def chat(model: str = ACME_MODEL, *, stream: bool = False, content: str = "hi") -> bytes:
    """A chat completions request body."""
    messages = [{"role": "user", "content": content}]
    return orjson.dumps({"model": model, "messages": messages, "stream": stream})


async def send_body(comm: Any, body: bytes) -> None:
    await comm.send_input({"type": "http.request", "body": body, "more_body": False})


async def read_reply(comm: Any, seconds: float = RECEIVE_TIMEOUT_SECONDS) -> Reply:
    """The whole reply; an exception the app raised surfaces once ``seconds`` have passed."""
    start = await comm.receive_output(seconds)
    assert start["type"] == "http.response.start"
    chunks: list[bytes] = []
    while True:
        event = await comm.receive_output(seconds)
        chunks.append(event["body"])
        if not event.get("more_body"):
            break
    await comm.wait(seconds)
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return Reply(start["status"], headers, chunks)


class FakeWriter:
    """The request log's writer (the ``request_log`` fixture's), keeping what the consumer
    submits."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def submit(self, record: RequestRecord) -> None:
        self.records.append(record)


@dataclass
class Gateway:
    """The chat consumer over the fake upstream and a store on the fake clock, with a key."""

    key: str
    fake: FakeUpstream
    clock: FakeClock
    store: StateStore
    app: Any = field(init=False)

    def __post_init__(self) -> None:
        self.app = asgi_app(self.fake, store=self.store)

    async def start(self, model: str = ACME_MODEL) -> Any:
        """Send one request and return the communicator, its reply still to read."""
        comm = communicator(self.app, self.key)
        await send_body(comm, chat(model))
        return comm

    async def call(self, model: str = ACME_MODEL) -> Reply:
        return await read_reply(await self.start(model))

    async def drive(self, body: bytes, count: int) -> list[int]:
        """``count`` requests straight through the ASGI application, in this task (no test
        communicator and its own tasks); the statuses answered."""
        statuses: list[int] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        for _ in range(count):
            received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            received.put_nowait({"type": "http.request", "body": body, "more_body": False})
            await self.app(http_scope(self.key), received.get, send)
        return statuses

    async def fail(
        self, model: str, times: int, gap: float = PAST_CONNECTION_DEDUP_SECONDS
    ) -> None:
        """Send ``times`` failing requests, ``gap`` clock seconds apart."""
        for attempt in range(times):
            if attempt:
                self.clock.advance(gap)
            assert (await self.call(model)).status >= 400

    async def breaker(self, provider: str) -> Breaker:
        return await breaker_get(store=self.store, name=provider)

    async def state(self, connection_id: int) -> ConnectionState:
        return await connection_state_get(
            store=self.store, connection_id=connection_id, durable=ConnectionState()
        )

    async def cooling_for(self, connection_id: int) -> float:
        return (await self.state(connection_id)).remaining(self.clock.now)


# --- data -----------------------------------------------------------------------------------


def add_provider(slug: str, **fields: Any) -> Provider:
    """An API-key provider at ``http://<slug>.test/v1``."""
    base = {"slug": slug, "name": slug.title(), "category": "api_key"}
    return provider_save(
        provider=Provider(), fields={**base, "base_url": f"http://{slug}.test/v1", **fields}
    )


def add_connection(provider: Provider, name: str, secret: str, **fields: Any) -> int:
    """The id of a new connection to ``provider`` holding ``secret``."""
    connection = connection_save(
        connection=ProviderConnection(),
        fields={"provider": provider, "name": name, **fields},
        secret=secret,
    )
    return connection.pk
