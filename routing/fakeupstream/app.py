"""The aiohttp application: chat completions, models and the ``/_fake`` control endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from routing.fakeupstream import wire
from routing.fakeupstream.behaviour import Behaviour, RequestRecord, checked_knobs
from routing.fakeupstream.journal import Journal

STALL_MAX_S: Final = 300.0
_LINGER_RST: Final = struct.pack("ii", 1, 0)


def _path_knobs(request: web.Request) -> dict[str, str]:
    raw = request.rel_url.raw_path
    if not raw.startswith("/s/"):
        return {}
    return dict(parse_qsl(raw[3:].split("/", 1)[0], keep_blank_values=True))


def _header_knobs(request: web.Request) -> dict[str, str]:
    return {
        key[7:].replace("-", "_"): value
        for name, value in request.headers.items()
        if (key := name.lower()).startswith("x-fake-")
    }


def _json_object(raw: bytes) -> dict[str, Any]:
    payload = orjson.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError("request body must be a JSON object")
    return payload


def _wants_usage(payload: Mapping[str, Any]) -> bool:
    options = payload.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


async def _stall(resp: web.StreamResponse | None) -> web.StreamResponse:
    await asyncio.sleep(STALL_MAX_S)
    return resp or wire.error(504, "fake upstream stalled", "server_error")


def _abort(request: web.Request, rec: RequestRecord) -> web.StreamResponse:
    """Reset the connection (RST); aiohttp then fails quietly to write the returned answer."""
    rec.aborted_at = time.monotonic()
    transport = request.transport
    if transport is not None:
        with contextlib.suppress(OSError, AttributeError, TypeError):
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        transport.abort()
    return web.Response(status=502)


class FakeApp:
    """Request handlers; knobs resolve as script > per-model knobs > header > model query >
    path > defaults, then an ``error_rate`` draw."""

    def __init__(self, defaults: Behaviour, journal: Journal, seed: int | None = None) -> None:
        self.defaults = defaults
        self.journal = journal
        # Only the server loop draws, so one generator per server keeps a seeded run repeatable.
        self._random = random.Random(seed)
        self._ids = itertools.count(1)

    def build(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{prefix:.*}chat/completions", self._chat)
        app.router.add_get("/{prefix:.*}models", self._models)
        app.router.add_get("/_fake/log", self._get_log)
        app.router.add_post("/_fake/reset", self._post_reset)
        app.router.add_post("/_fake/script", self._post_script)
        app.router.add_post("/_fake/models", self._post_model)
        app.router.add_get("/_fake/stats", self._get_stats)
        return app

    def _resolve(self, request: web.Request, model: str) -> Behaviour:
        knobs = {
            **_path_knobs(request),
            **dict(parse_qsl(model.partition("?")[2], keep_blank_values=True)),
            **_header_knobs(request),
            **self.journal.model_knobs(model.partition("?")[0]),
            **self.journal.pop_script(),
        }
        return self.defaults.with_knobs(knobs) if knobs else self.defaults

    def _draw(self, b: Behaviour) -> Behaviour:
        """With ``error_rate`` set, the failure applies with that probability, else a 200."""
        if b.error_rate is None or not b.fails:
            return b
        return b if self._random.random() < b.error_rate else b.healthy()

    def _record(self, request: web.Request, body: Any, b: Behaviour) -> RequestRecord:
        recording = self.journal.recording
        headers = {k.lower(): v for k, v in request.headers.items()} if recording else {}
        rec = RequestRecord(time.monotonic(), request.method, request.path, headers, body, b)
        self.journal.add(rec)
        return rec

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            payload = _json_object(await request.read())
            model = str(payload.get("model") or "fake-model")
            behaviour = self._draw(self._resolve(request, model))
        except ValueError as exc:
            return wire.error(400, str(exc), "fake_knob_error")
        self.journal.count(failed=behaviour.fails)
        rec = self._record(request, payload, behaviour)
        rec.model, rec.stream = model.partition("?")[0], payload.get("stream") is True
        try:
            resp = await self._answer(request, rec, _wants_usage(payload))
        except (asyncio.CancelledError, ConnectionError):
            if rec.aborted_at is None:
                rec.disconnected_at = time.monotonic()
                self.journal.touch()
            raise
        rec.completed = rec.aborted_at is None
        self.journal.touch()
        return resp

    async def _answer(
        self, request: web.Request, rec: RequestRecord, usage: bool
    ) -> web.StreamResponse:
        b = rec.behaviour
        if b.latency_ms:
            await asyncio.sleep(b.latency_ms / 1000)
        if b.reset == "before":
            return _abort(request, rec)
        if b.stall == "before":
            return await _stall(None)
        if b.body is not None or not 200 <= b.status < 300:
            return wire.error_answer(b)
        if rec.stream:
            return await self._stream(request, rec, usage)
        return await self._complete(request, rec)

    async def _complete(self, request: web.Request, rec: RequestRecord) -> web.StreamResponse:
        b = rec.behaviour
        rid = wire.request_id(next(self._ids))
        body = wire.completion_body(rec.model, b.chunks * b.chunk_size).replace(wire.ID, rid)
        headers = wire.headers(b, "application/json")
        if b.mid is None:
            return web.Response(status=b.status, body=body, headers=headers)
        resp = web.StreamResponse(status=b.status, headers=headers)
        resp.content_length = len(body)
        await resp.prepare(request)
        await resp.write(body[: len(body) // 2])
        return await self._midway(request, resp, rec)

    async def _stream(
        self, request: web.Request, rec: RequestRecord, usage: bool
    ) -> web.StreamResponse:
        b = rec.behaviour
        events = wire.stream_events(rec.model, b.chunks, b.chunk_size, usage)
        rid = wire.request_id(next(self._ids))
        headers = {**wire.headers(b, "text/event-stream"), "Cache-Control": "no-cache"}
        resp = web.StreamResponse(status=b.status, headers=headers)
        await resp.prepare(request)
        upto = b.chunks // 2 if b.mid else b.chunks
        await self._send(resp, rec, events[:upto], rid)
        if b.mid:
            return await self._midway(request, resp, rec)
        await resp.write(b"".join(events[b.chunks :]).replace(wire.ID, rid))
        await resp.write_eof()
        return resp

    async def _send(
        self, resp: web.StreamResponse, rec: RequestRecord, events: tuple[bytes, ...], rid: bytes
    ) -> None:
        interval = rec.behaviour.chunk_interval_ms / 1000
        if not interval:
            await resp.write(b"".join(events).replace(wire.ID, rid))
            rec.chunks_sent, rec.last_chunk_at = len(events), time.monotonic()
            return
        for i, event in enumerate(events):
            if i:
                await asyncio.sleep(interval)
            await resp.write(event.replace(wire.ID, rid))
            rec.chunks_sent, rec.last_chunk_at = i + 1, time.monotonic()
            self.journal.touch()

    async def _midway(
        self, request: web.Request, resp: web.StreamResponse, rec: RequestRecord
    ) -> web.StreamResponse:
        action = rec.behaviour.mid
        if action == "reset":
            return _abort(request, rec)
        if action == "stall":
            return await _stall(resp)
        if rec.stream:
            await resp.write_eof()
        elif request.transport is not None:
            request.transport.close()
        return resp

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._record(request, None, self.defaults).completed = True
        return web.Response(body=wire.models_body(), content_type="application/json")

    async def _get_log(self, request: web.Request) -> web.StreamResponse:
        return wire.json_response(self.journal.snapshot())

    async def _post_reset(self, request: web.Request) -> web.StreamResponse:
        self.journal.reset()
        return wire.json_response({"reset": True})

    async def _get_stats(self, request: web.Request) -> web.StreamResponse:
        return wire.json_response(self.journal.stats())

    async def _post_model(self, request: web.Request) -> web.StreamResponse:
        try:
            item = _json_object(await request.read())
            model, knobs = str(item["model"]), checked_knobs(item.get("knobs") or {})
        except (KeyError, TypeError, ValueError) as exc:
            return wire.error(400, f"need {{model, knobs}}: {exc}", "fake_knob_error")
        self.journal.set_model(model, knobs)
        return wire.json_response({"model": model, "knobs": knobs})

    async def _post_script(self, request: web.Request) -> web.StreamResponse:
        try:
            items = orjson.loads(await request.read())
            items = [items] if isinstance(items, dict) else items
            self.journal.push_script([checked_knobs(item) for item in items])
        except (TypeError, ValueError) as exc:
            return wire.error(400, str(exc), "fake_knob_error")
        return wire.json_response({"queued": len(items)})
