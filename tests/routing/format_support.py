"""The consumer harness for the Responses and Messages endpoints (``/v1/responses``,
``/v1/messages``), beside the chat one in ``harness.py``.

``FormatUpstream`` answers by the connection secret as ``FakeUpstream`` does, but finds it in
``x-api-key`` too (how Anthropic-format providers are called); ``Relay`` runs the generic
``RelayConsumer`` for one endpoint over it and a store on the fake clock, with a client key it
can present either way. Plus request bodies and server-sent events in each API's shape, and
readers of what the client received.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from channels.testing import ApplicationCommunicator

from omniroute.core.store import MemoryStore
from resilience.domain.connection_state import ConnectionState
from resilience.services.connections import connection_state_get
from resilience.services.lockouts import lockout_record
from routing.domain.client.endpoints import CHAT_COMPLETIONS, MESSAGES, RESPONSES, Endpoint
from routing.models import Provider
from routing.proxy.consumers import RelayConsumer
from routing.proxy.upstream.client import Upstream
from routing.services import api_key_create
from tests.routing.harness import (
    Behaviour,
    FakeClock,
    FakeUpstream,
    Reply,
    add_provider,
    answer,
    read_reply,
    send_body,
)

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
PATHS = {
    CHAT_COMPLETIONS.name: CHAT_PATH,
    RESPONSES.name: RESPONSES_PATH,
    MESSAGES.name: MESSAGES_PATH,
}

# The two keys of ``claude``, an Anthropic-format provider (the test modules' fixtures).
CLAUDE_PRIMARY = "sk-ant-PRIMARY-0001"
CLAUDE_BACKUP = "sk-ant-BACKUP-0002"
CLAUDE_MODEL = "claude/opus"
ACME_MODEL = "acme/m1"  # an OpenAI-format provider's model (conftest's ``acme``)

Headers = Sequence[tuple[bytes, bytes]]


def add_anthropic_provider(slug: str = "claude", **fields: Any) -> Provider:
    """An API-key provider speaking Anthropic's wire format at ``http://<slug>.test/v1``."""
    return add_provider(slug, wire_format="anthropic", **fields)


# --- the upstream ----------------------------------------------------------------------------


@dataclass
class FormatUpstream(FakeUpstream):
    """``FakeUpstream`` (which reads the secret of either wire format), with the bodies sent."""

    def bodies(self) -> list[dict[str, Any]]:
        """Each request's JSON body, in order."""
        return [orjson.loads(r.content) for r in self.requests]


# --- driving the consumer --------------------------------------------------------------------


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode())]


def x_api_key(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-api-key", key.encode())]


def scope_of(
    method: str, path: str, headers: Headers, url_kwargs: dict[str, str] | None = None
) -> dict[str, Any]:
    """An HTTP scope, ``url_route`` set as Channels' router sets it when ``url_kwargs``."""
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": list(headers),
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    if url_kwargs is not None:
        scope["url_route"] = {"args": (), "kwargs": url_kwargs}
    return scope


async def exchange(app: Any, scope: dict[str, Any], body: bytes = b"") -> Reply:
    comm = ApplicationCommunicator(app, scope)
    await send_body(comm, body)
    return await read_reply(comm)


@dataclass
class Relay:
    """``RelayConsumer`` for ``endpoint`` over the fake upstream and ``store``, with a key."""

    endpoint: Endpoint
    key: str
    fake: FormatUpstream
    clock: FakeClock
    store: MemoryStore
    app: Any = field(init=False)

    def __post_init__(self) -> None:
        upstream = Upstream(httpx.MockTransport(self.fake))
        self.app = RelayConsumer.as_asgi(
            upstream=upstream, store=self.store, endpoint=self.endpoint
        )

    @property
    def path(self) -> str:
        return PATHS[self.endpoint.name]

    async def post(
        self,
        body: bytes | dict[str, Any],
        *,
        auth: Headers | None = None,
        headers: Headers = (),
        method: str = "POST",
    ) -> Reply:
        """One request (a Bearer key unless ``auth`` says otherwise); its whole reply."""
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        presented = bearer(self.key) if auth is None else auth
        scope = scope_of(method, self.path, [*presented, *headers])
        return await exchange(self.app, scope, raw)

    async def state(self, connection_id: int) -> ConnectionState:
        return await connection_state_get(
            store=self.store, connection_id=connection_id, durable=ConnectionState()
        )

    async def cooling_for(self, connection_id: int) -> float:
        return (await self.state(connection_id)).remaining(self.clock.now)

    async def lock_remaining(self, provider: str, connection_id: int, model: str) -> float:
        record = await lockout_record(
            store=self.store, provider=provider, connection_id=connection_id
        )
        lock = record.lock_for(model, self.clock.now)
        return 0.0 if lock is None else lock.remaining(self.clock.now)


def relay_for(endpoint: Endpoint, clock: FakeClock, store: MemoryStore) -> Relay:
    """A ``Relay`` with a fresh client key (call from a sync fixture: it writes the key)."""
    _, key = api_key_create(name="client")
    return Relay(endpoint, key, FormatUpstream(), clock, store)


# --- request bodies --------------------------------------------------------------------------


def responses_request(model: str = ACME_MODEL, *, stream: bool = False, **fields: Any) -> bytes:
    """A Responses request body; ``input`` unless ``fields`` set it (or ``None`` to omit)."""
    payload: dict[str, Any] = {"model": model, "input": "Say hi", "stream": stream, **fields}
    return orjson.dumps({k: v for k, v in payload.items() if v is not None})


def messages_request(model: str = CLAUDE_MODEL, *, stream: bool = False, **fields: Any) -> bytes:
    """A Messages request body; ``messages`` and ``max_tokens`` unless ``fields`` set them."""
    payload: dict[str, Any] = {
        "model": model,
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": "Say hi"}],
        **fields,
    }
    return orjson.dumps({k: v for k, v in payload.items() if v is not None})


# --- plain answers ---------------------------------------------------------------------------


def response_object(ident: str = "resp_1", text: str = "Hi there.") -> dict[str, Any]:
    """A completed Responses answer."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": content,
    }
    return {
        "id": ident,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": "m1",
        "output": [item],
        "usage": {"input_tokens": 3, "output_tokens": 3, "total_tokens": 6},
    }


def message_object(ident: str = "msg_01", text: str = "Hi there.") -> dict[str, Any]:
    """A Messages answer."""
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": "opus",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 3},
    }


def json_answer(payload: dict[str, Any], status: int = 200) -> Behaviour:
    """Answer ``payload`` as JSON (unread, as real transports return it)."""
    return answer(status, orjson.dumps(payload))


def anthropic_error(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Behaviour:
    """Answer ``status`` with an error body in Anthropic's shape."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return answer(status, orjson.dumps(body), headers)


# --- server-sent events ----------------------------------------------------------------------

TEXT = ["The ", "quick ", "brown ", "fox."]


def named(name: str, payload: dict[str, Any]) -> bytes:
    """One event with its ``event:`` line, as both APIs send them."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def responses_events(
    texts: Sequence[str] = TEXT,
    *,
    ident: str = "resp_1",
    completed: bool = True,
    usage: dict[str, int] | None = None,
) -> list[bytes]:
    """A streamed Responses answer, one event per chunk: created, in progress, the item and
    its part, one delta per text, the done events and (unless not ``completed``)
    ``response.completed``, with ``usage`` when given. Each event has its
    ``sequence_number``; there is no ``[DONE]``."""
    response = {
        "id": ident,
        "object": "response",
        "status": "in_progress",
        "model": "m1",
        "output": [],
    }
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    text = "".join(texts)
    done_item = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    steps: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        (
            "response.content_part.added",
            {**at, "part": {"type": "output_text", "text": "", "annotations": []}},
        ),
        *[("response.output_text.delta", {**at, "delta": delta}) for delta in texts],
        ("response.output_text.done", {**at, "text": text}),
        (
            "response.content_part.done",
            {**at, "part": {"type": "output_text", "text": text, "annotations": []}},
        ),
        ("response.output_item.done", {"output_index": 0, "item": done_item}),
    ]
    if completed:
        finished: dict[str, Any] = {**response, "status": "completed", "output": [done_item]}
        if usage is not None:
            finished["usage"] = usage
        steps.append(("response.completed", {"response": finished}))
    return [
        named(name, {"type": name, "sequence_number": number, **fields})
        for number, (name, fields) in enumerate(steps)
    ]


# The index of the first ``response.output_text.delta`` in ``responses_events()``.
RESPONSES_FIRST_TOKEN = 4


def messages_events(
    texts: Sequence[str] = TEXT, *, ident: str = "msg_01", stop: bool = True
) -> list[bytes]:
    """A streamed Messages answer, one event per chunk: ``message_start``, a text block (its
    start, a ping, one delta per text, its stop), ``message_delta`` with the stop reason and
    (unless not ``stop``) ``message_stop``."""
    message: dict[str, Any] = {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": "opus",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    steps: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": message}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("ping", {}),
        *[
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})
            for text in texts
        ],
        ("content_block_stop", {"index": 0}),
        (
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
    ]
    if stop:
        steps.append(("message_stop", {}))
    return [named(name, {"type": name, **fields}) for name, fields in steps]


# The index of the first ``content_block_delta`` in ``messages_events()``.
MESSAGES_FIRST_TOKEN = 3


# --- reading what the client got -------------------------------------------------------------


def sse(reply: Reply) -> list[tuple[str | None, dict[str, Any]]]:
    """Each event of a streamed reply: its ``event:`` name and its JSON data."""
    events = []
    for raw in reply.body.split(b"\n\n"):
        if not raw.strip():
            continue
        name, data = None, []
        for line in raw.split(b"\n"):
            if line.startswith(b"event: "):
                name = line.removeprefix(b"event: ").decode()
            elif line.startswith(b"data: "):
                data.append(line.removeprefix(b"data: "))
        events.append((name, orjson.loads(b"\n".join(data))))
    return events


def responses_text(reply: Reply) -> str:
    return "".join(
        payload["delta"]
        for _, payload in sse(reply)
        if payload.get("type") == "response.output_text.delta"
    )


def messages_text(reply: Reply) -> str:
    return "".join(
        payload["delta"]["text"]
        for _, payload in sse(reply)
        if payload.get("type") == "content_block_delta"
    )


def anthropic_shaped(reply: Any) -> dict[str, Any]:
    """The error object of a body in Anthropic's shape."""
    body = reply.json()
    assert body["type"] == "error"
    error_object = body["error"]
    assert isinstance(error_object, dict) and {"type", "message"} <= set(error_object)
    return error_object
