"""Writing one answer in any dialect: latency, resets, stalls (with heartbeats), errors, the
prefill and tool-count rules, and the completion or stream with its mid-answer faults."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
import time
from collections.abc import Sequence
from typing import Final

from aiohttp import web

from omniroute.tools.fakeupstream import wire
from omniroute.tools.fakeupstream.behaviour import Behaviour, RequestRecord
from omniroute.tools.fakeupstream.dialect import CHAT, Dialect
from omniroute.tools.fakeupstream.journal import Journal

STALL_MAX_S: Final = 300.0
_LINGER_RST: Final = struct.pack("ii", 1, 0)


def rejects_prefill(rec: RequestRecord) -> bool:
    """The request carries an assistant prefill and the behaviour refuses it."""
    return rec.prefill is not None and rec.behaviour.prefill == "reject"


def tools_refusal(rec: RequestRecord) -> str | None:
    """The refusal of a request carrying more ``tools`` than ``max_tools`` allows, else None."""
    limit = rec.behaviour.max_tools
    if limit is None:
        return None
    tools = rec.body.get("tools") if isinstance(rec.body, dict) else None
    count = len(tools) if isinstance(tools, list) else 0
    if count <= limit:
        return None
    return f"too many tools: this model supports at most {limit} tools (max {limit}), got {count}"


def refused(rec: RequestRecord) -> bool:
    """The request itself is refused: a prefill the behaviour rejects, or too many tools."""
    return rejects_prefill(rec) or tools_refusal(rec) is not None


def answer_of(rec: RequestRecord) -> wire.Answer:
    """The text this answer carries: the whole text, or only the continuation of an accepted
    prefill (the full text minus as many characters as the prefill has)."""
    b = rec.behaviour
    n_chars = b.chunks * b.chunk_size
    skip = len(rec.prefill) if rec.prefill is not None and b.prefill == "accept" else 0
    return wire.Answer(n_chars, b.text, min(skip, n_chars), b.reasoning)


def mid_point(b: Behaviour, n_chunks: int) -> int:
    """How many content chunks go out before the ``mid`` action (all of them without one)."""
    if not b.mid:
        return n_chunks
    return n_chunks // 2 if b.mid_at is None else min(b.mid_at, n_chunks)


def _with_malformed(events: Sequence[bytes], at: int | None, malformed: bytes) -> Sequence[bytes]:
    if at is None or at > len(events):
        return events
    return (*events[:at], malformed, *events[at:])


async def stall(
    resp: web.StreamResponse | None,
    rec: RequestRecord,
    heartbeat_ms: float = 0.0,
    dialect: Dialect = CHAT,
) -> web.StreamResponse:
    """Write nothing (or only ``: ping`` comments every ``heartbeat_ms`` into an open stream)
    until the client goes away, up to :data:`STALL_MAX_S`."""
    if resp is None or not heartbeat_ms:
        await asyncio.sleep(STALL_MAX_S)
        return resp or dialect.error(504, "fake upstream stalled")
    deadline = time.monotonic() + STALL_MAX_S
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(heartbeat_ms / 1000, left))
        await resp.write(wire.PING)
        rec.pings_sent += 1
    return resp


def abort(request: web.Request, rec: RequestRecord) -> web.StreamResponse:
    """Reset the connection (RST); aiohttp then fails quietly to write the returned answer."""
    rec.aborted_at = time.monotonic()
    transport = request.transport
    if transport is not None:
        with contextlib.suppress(OSError, AttributeError, TypeError):
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        transport.abort()
    return web.Response(status=502)


class Answerer:
    """Writes the answer a :class:`RequestRecord`'s behaviour describes."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._ids = itertools.count(1)

    async def answer(
        self, request: web.Request, rec: RequestRecord, dialect: Dialect, usage: bool
    ) -> web.StreamResponse:
        """Answer ``rec`` in ``dialect``; ``usage``: a chat stream carries its usage event."""
        b = rec.behaviour
        if b.latency_ms:
            await asyncio.sleep(b.latency_ms / 1000)
        if b.reset == "before":
            return abort(request, rec)
        if b.stall == "before":
            return await self._stall_before(request, rec, dialect)
        if b.body is not None or not 200 <= b.status < 300:
            return dialect.error_answer(b)
        if rejects_prefill(rec):
            return dialect.error(400, wire.PREFILL_REJECTED)
        if (refusal := tools_refusal(rec)) is not None:
            return dialect.error(400, refusal)
        if rec.stream:
            return await self._stream(request, rec, dialect, usage)
        return await self._complete(request, rec, dialect)

    async def _stall_before(
        self, request: web.Request, rec: RequestRecord, dialect: Dialect
    ) -> web.StreamResponse:
        """No headers at all; with ``heartbeat_ms`` a stream's headers, then only pings."""
        b = rec.behaviour
        if not (rec.stream and b.heartbeat_ms):
            return await stall(None, rec, dialect=dialect)
        return await stall(await self._open_stream(request, b), rec, b.heartbeat_ms)

    async def _complete(
        self, request: web.Request, rec: RequestRecord, dialect: Dialect
    ) -> web.StreamResponse:
        b = rec.behaviour
        rid = dialect.request_id(next(self._ids))
        headers = wire.headers(b, "application/json")
        answer = answer_of(rec)
        if (
            dialect is CHAT
            and b.mid is None
            and answer.n_chars - answer.skip > wire.LAZY_STREAM_CHARS
        ):
            return await self._complete_piecewise(request, rec, (dialect.placeholder, rid))
        body = dialect.completion_body(rec.model, answer).replace(dialect.placeholder, rid)
        if b.mid is None:
            return web.Response(status=b.status, body=body, headers=headers)
        resp = web.StreamResponse(status=b.status, headers=headers)
        resp.content_length = len(body)
        await resp.prepare(request)
        await resp.write(body[: len(body) // 2])
        return await self._midway(request, resp, rec)

    async def _complete_piecewise(
        self, request: web.Request, rec: RequestRecord, ids: tuple[bytes, bytes]
    ) -> web.StreamResponse:
        """A long chat completion, its text written a piece at a time (never built whole)."""
        answer, b = answer_of(rec), rec.behaviour
        before, after = wire.completion_around(rec.model, answer)
        before = before.replace(*ids)
        n_chars = max(answer.n_chars - answer.skip, 0)
        resp = web.StreamResponse(status=b.status, headers=wire.headers(b, "application/json"))
        resp.content_length = len(before) + n_chars + len(after)
        await resp.prepare(request)
        await resp.write(before)
        for start in range(0, n_chars, wire.LAZY_STREAM_CHARS):
            await resp.write(answer.piece(start, wire.LAZY_STREAM_CHARS).encode())
        await resp.write(after)
        await resp.write_eof()
        return resp

    async def _open_stream(self, request: web.Request, b: Behaviour) -> web.StreamResponse:
        headers = {**wire.headers(b, "text/event-stream"), "Cache-Control": "no-cache"}
        resp = web.StreamResponse(status=b.status, headers=headers)
        await resp.prepare(request)
        return resp

    async def _stream(
        self, request: web.Request, rec: RequestRecord, dialect: Dialect, usage: bool
    ) -> web.StreamResponse:
        b = rec.behaviour
        events = dialect.stream_events(rec.model, answer_of(rec), b.chunk_size, usage)
        ids = (dialect.placeholder, dialect.request_id(next(self._ids)))
        resp = await self._open_stream(request, b)
        upto = mid_point(b, len(events.content))
        malformed = None if b.malformed_at is None else min(b.malformed_at, len(events.content))
        content = events.content[:upto]
        head = events.head
        if b.big_event_bytes is not None:  # written as it is (no id to swap in), never copied
            if head:
                await resp.write(b"".join(head).replace(*ids))
            await resp.write(wire.big_event(b.big_event_bytes))
            head = ()
        await self._send(resp, rec, head, content, ids, (malformed, dialect.malformed))
        if b.mid:
            return await self._midway(request, resp, rec)
        tail = (*events.tail, dialect.done_line) if b.done == "yes" else events.tail
        await resp.write(b"".join(tail).replace(*ids))
        if b.done == "hang":
            return await stall(resp, rec)
        await resp.write_eof()
        return resp

    async def _send(
        self,
        resp: web.StreamResponse,
        rec: RequestRecord,
        head: tuple[bytes, ...],
        events: Sequence[bytes],
        ids: tuple[bytes, bytes],
        malformed: tuple[int | None, bytes],
    ) -> None:
        """Write the ``head`` events, then the content ``events`` with ``ids`` = (placeholder,
        id) swapped in, and ``malformed`` = (k, event): that event before event k (after the
        last one when k equals their number; none when k is None)."""
        interval = rec.behaviour.chunk_interval_ms / 1000
        at, bad = malformed
        if not interval:
            await resp.write(b"".join((*head, *_with_malformed(events, at, bad))).replace(*ids))
            rec.chunks_sent, rec.last_chunk_at = len(events), time.monotonic()
            return
        if head:
            await resp.write(b"".join(head).replace(*ids))
        for i, event in enumerate(events):
            if i:
                await asyncio.sleep(interval)
            if i == at:
                await resp.write(bad)
            await resp.write(event.replace(*ids))
            rec.chunks_sent, rec.last_chunk_at = i + 1, time.monotonic()
            self.journal.touch()
        if at == len(events):
            await resp.write(bad)

    async def _midway(
        self, request: web.Request, resp: web.StreamResponse, rec: RequestRecord
    ) -> web.StreamResponse:
        action = rec.behaviour.mid
        if action == "reset":
            return abort(request, rec)
        if action == "stall":
            heartbeat = rec.behaviour.heartbeat_ms if rec.stream else 0.0
            return await stall(resp, rec, heartbeat)
        if rec.stream:
            await resp.write_eof()
        elif request.transport is not None:
            request.transport.close()
        return resp
