"""Dialects: how one API format says an answer. A :class:`Dialect` gives the cached completion
body, the stream events (head, content, tail), the end-of-stream line, the malformed event,
the assistant prefill of a request and the error bodies; :class:`Chat` is OpenAI Chat
Completions. The answer's timing and faults (:mod:`omniroute.tools.fakeupstream.answer`) are the
same
for every dialect."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import orjson
from aiohttp import web

from omniroute.tools.fakeupstream import wire
from omniroute.tools.fakeupstream.behaviour import Behaviour

# The width of the per-request part of every non-chat id, e.g. ``resp_fake_000000000001``.
NEW_ID: Final = b"_fake_000000000000"


def new_request_id(n: int) -> bytes:
    """The ``n``-th answer's replacement for :data:`NEW_ID`, as wide as it."""
    return b"_fake_%012d" % n


def sse(data: Mapping[str, Any]) -> bytes:
    """One server-sent event named by its ``type`` in an ``event:`` line, as the Responses and
    Messages APIs send them."""
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class Dialect:
    """One API format. Cached bodies and events carry :attr:`placeholder` where the answer's id
    goes; the answerer swaps in :meth:`request_id` with ``bytes.replace``."""

    name: ClassVar[str]
    placeholder: ClassVar[bytes] = NEW_ID
    done_line: ClassVar[bytes] = b""  # written after the tail when ``done=yes``
    malformed: ClassVar[bytes]  # an event whose ``data:`` is truncated JSON

    def request_id(self, n: int) -> bytes:
        return new_request_id(n)

    def prefill_of(self, payload: Mapping[str, Any]) -> str | None:
        """The request's assistant prefill (None: there is none, or the API has no such thing)."""
        return None

    def wants_usage(self, payload: Mapping[str, Any]) -> bool:
        """Whether the stream carries usage only on request (chat); the others always do."""
        return True

    def completion_body(self, model: str, answer: wire.Answer) -> bytes:
        raise NotImplementedError

    def stream_events(
        self, model: str, answer: wire.Answer, size: int, usage: bool
    ) -> wire.StreamEvents:
        raise NotImplementedError

    def error_json(self, status: int, message: str, kind: str | None = None) -> bytes:
        return wire.error_json(status, message, kind)

    def settle(self, b: Behaviour) -> Behaviour:
        """``b`` as this format can act on it: without an end-of-stream line to leave out,
        ``done=close`` ends the stream as ``yes`` does, so it is ``yes`` (a plain success)."""
        if self.done_line or b.done != "close":
            return b
        return dataclasses.replace(b, done="yes")

    def error(self, status: int, message: str, kind: str | None = None) -> web.Response:
        return wire.error(status, message, kind, self.error_json)

    def error_answer(self, b: Behaviour) -> web.Response:
        """The answer for a non-2xx ``status`` or an explicit ``body`` knob."""
        return wire.error_answer(b, self.error_json)


class Chat(Dialect):
    """OpenAI Chat Completions: ``chat.completion`` bodies, ``data:``-only chunk events,
    ``data: [DONE]`` at the end, usage events on ``stream_options.include_usage``."""

    name = "chat"
    placeholder = wire.ID
    done_line = wire.DONE
    malformed = wire.MALFORMED

    def request_id(self, n: int) -> bytes:
        return wire.request_id(n)

    def prefill_of(self, payload: Mapping[str, Any]) -> str | None:
        return wire.prefill_of(payload)

    def wants_usage(self, payload: Mapping[str, Any]) -> bool:
        options = payload.get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))

    def completion_body(self, model: str, answer: wire.Answer) -> bytes:
        return wire.completion_body(model, answer)

    def stream_events(
        self, model: str, answer: wire.Answer, size: int, usage: bool
    ) -> wire.StreamEvents:
        return wire.stream_events(model, answer, size, usage)


CHAT: Final = Chat()
