"""Streamed answers for the consumer tests: SSE chunks, upstream behaviours that stream, cut or
stall them, and readers of what the client received."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson

from tests.routing.harness import (
    RECEIVE_TIMEOUT_SECONDS,
    Behaviour,
    Gateway,
    Reply,
    communicator,
    read_reply,
    send_body,
)

SSE = {"content-type": "text/event-stream"}
PING = b": ping\n\n"
TEXT = ["The ", "quick ", "brown ", "fox ", "jumps."]
MODEL = "acme/m1"


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, ident: str = "up-1") -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return event(
        {"id": ident, "object": "chat.completion.chunk", "model": "m1", "choices": [choice]}
    )


def answer_chunks(
    texts: list[str] = TEXT, *, ident: str = "up-1", usage: bool = False, done: bool = True
) -> list[bytes]:
    """A whole streamed answer: a role delta, one chunk per text, the finish, [usage, DONE]."""
    chunks = [chunk({"role": "assistant", "content": ""}, ident=ident)]
    chunks += [chunk({"content": text}, ident=ident) for text in texts]
    chunks.append(chunk({}, "stop", ident))
    if usage:
        chunks.append(event({"id": ident, "choices": [], "usage": {"total_tokens": 12}}))
    if done:
        chunks.append(b"data: [DONE]\n\n")
    return chunks


def streaming(
    chunks: list[bytes], *, then: BaseException | None = None, hang: bool = False
) -> Behaviour:
    """Stream ``chunks``; then raise ``then`` (a cut) or hang (a stall) instead of ending."""

    async def body() -> AsyncIterator[bytes]:
        for part in chunks:
            yield part
        if then is not None:
            raise then
        if hang:
            await asyncio.Event().wait()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=body())

    return behaviour


def stopping_after(chunks: list[bytes], stop: Callable[[], None]) -> Behaviour:
    """Stream ``chunks``; then ``stop`` (the process starts to stop) and send nothing more."""

    async def body() -> AsyncIterator[bytes]:
        for part in chunks:
            yield part
        stop()
        await asyncio.Event().wait()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=body())

    return behaviour


def pinging(chunks: list[bytes], every: float = 0.02) -> Behaviour:
    """Stream ``chunks``, then only the comment ``: ping`` every ``every`` seconds, for good."""

    async def body() -> AsyncIterator[bytes]:
        for part in chunks:
            yield part
        while True:
            await asyncio.sleep(every)
            yield PING

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=body())

    return behaviour


CUT = httpx.ReadError("connection reset by peer")


def cut_after(n: int, texts: list[str] = TEXT) -> Behaviour:
    """The answer's role delta and first ``n`` texts, then a reset."""
    return streaming(answer_chunks(texts)[: 1 + n], then=CUT)


async def ask(gateway: Gateway, model: str = MODEL, **extra: Any) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body.update(extra)
    await send_body(comm, orjson.dumps(body))
    return await read_reply(comm, RECEIVE_TIMEOUT_SECONDS)


def events_of(reply: Reply) -> list[bytes]:
    return [part + b"\n\n" for part in reply.body.split(b"\n\n") if part]


def text_of(reply: Reply) -> str:
    text = []
    for raw in events_of(reply):
        if raw.startswith(b":"):  # a comment
            continue
        data = raw.removeprefix(b"data: ").strip()
        if data != b"[DONE]":
            for choice in orjson.loads(data).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def sent_messages(gateway: Gateway, secret: str) -> list[list[dict[str, Any]]]:
    return [
        orjson.loads(r.content)["messages"]
        for r in gateway.fake.requests
        if r.headers["authorization"] == f"Bearer {secret}"
    ]


def text_of_without_error(reply: Reply) -> str:
    kept = [raw for raw in events_of(reply) if b'"error"' not in raw]
    return text_of(Reply(reply.status, reply.headers, kept))
