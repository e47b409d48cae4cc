"""The aiohttp application: chat completions, responses, messages, models and the ``/_fake``
control endpoints."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from omniroute.tools.fakeupstream import wire
from omniroute.tools.fakeupstream.answer import Answerer, refused
from omniroute.tools.fakeupstream.behaviour import Behaviour, RequestRecord, checked_knobs
from omniroute.tools.fakeupstream.dialect import CHAT, Dialect
from omniroute.tools.fakeupstream.journal import Journal
from omniroute.tools.fakeupstream.messages_api import MESSAGES
from omniroute.tools.fakeupstream.responses_api import RESPONSES


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


def _peer(request: web.Request) -> object:
    """The client end of the request's TCP connection: one per connection, reused or not."""
    transport = request.transport
    return transport.get_extra_info("peername") if transport is not None else None


class FakeApp:
    """Request handlers; knobs resolve as script > per-model knobs > header > model query >
    path > defaults, then an ``error_rate`` draw."""

    def __init__(self, defaults: Behaviour, journal: Journal, seed: int | None = None) -> None:
        self.defaults = defaults
        self.journal = journal
        # Only the server loop draws, so one generator per server keeps a seeded run repeatable.
        self._random = random.Random(seed)
        self._answerer = Answerer(journal)

    def build(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{prefix:.*}chat/completions", self._chat)
        app.router.add_post("/{prefix:.*}responses", self._responses)
        app.router.add_post("/{prefix:.*}messages", self._messages)
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

    def _record(
        self, request: web.Request, body: Any, b: Behaviour, **fields: Any
    ) -> RequestRecord:
        """A new record, complete before other threads can see it in the journal."""
        recording = self.journal.recording
        headers = {k.lower(): v for k, v in request.headers.items()} if recording else {}
        rec = RequestRecord(
            time.monotonic(), request.method, request.path, headers, body, b, **fields
        )
        self.journal.add(rec)
        return rec

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, CHAT)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, RESPONSES)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, MESSAGES)

    async def _answer(self, request: web.Request, dialect: Dialect) -> web.StreamResponse:
        try:
            payload = _json_object(await request.read())
            model = str(payload.get("model") or "fake-model")
            behaviour = self._draw(dialect.settle(self._resolve(request, model)))
        except ValueError as exc:
            return dialect.error(400, str(exc), "fake_knob_error")
        peer = _peer(request)
        rec = self._record(
            request,
            payload,
            behaviour,
            model=model.partition("?")[0],
            stream=payload.get("stream") is True,
            prefill=dialect.prefill_of(payload),
            peer=":".join(map(str, peer)) if isinstance(peer, tuple) else "",
        )
        self.journal.count(failed=behaviour.fails or refused(rec), peer=peer)
        try:
            usage = dialect.wants_usage(payload)
            resp = await self._answerer.answer(request, rec, dialect, usage)
        except (asyncio.CancelledError, ConnectionError):
            if rec.aborted_at is None:
                rec.disconnected_at = rec.finished_at = time.monotonic()
                self.journal.touch()
            raise
        rec.completed = rec.aborted_at is None
        rec.finished_at = time.monotonic()
        self.journal.touch()
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
