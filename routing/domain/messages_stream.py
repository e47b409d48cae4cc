"""What an Anthropic Messages stream has told the client so far (pure).

Events: ``message_start``, then per content block ``content_block_start``, its
``content_block_delta`` events and ``content_block_stop``, then ``message_delta`` (carrying the
``stop_reason``: the answer is finished) and ``message_stop`` (the stream's end); ``ping`` is a
heartbeat and ``error`` an in-band error. Every delta is a token (text, thinking, tool input), as
is the start of a tool-use block, which names the tool.

A cut Messages stream is not continued yet: it ends with an ``error`` event.
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.domain.sse import SseEvent
from routing.domain.stream_state import Kind

MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


class MessagesStream:
    """The state of one Messages stream (see the module docstring)."""

    __slots__ = ("envelope", "finished", "text")
    continuable = False
    end_event = MESSAGE_STOP

    def __init__(self) -> None:
        self.text: list[str] = []
        self.finished = False
        self.envelope: dict[str, Any] | None = None  # the message's id and model

    def observe(self, event: SseEvent) -> tuple[Kind, dict[str, Any] | None]:
        data = event.data
        if data is None:
            return Kind.PREAMBLE, None
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return Kind.MALFORMED, None
        if not isinstance(payload, dict):
            return Kind.MALFORMED, None
        kind = payload.get("type") or event.name
        if kind == "content_block_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                text = delta.get("text")
                if type(text) is str:
                    self.text.append(text)
            return Kind.TOKEN, payload
        if kind == "content_block_start":
            block = payload.get("content_block")
            is_text = isinstance(block, dict) and block.get("type") in ("text", "thinking")
            return (Kind.PREAMBLE if is_text else Kind.TOKEN), payload
        if kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.finished = True
            return Kind.USAGE, payload
        if kind == "message_stop":
            self.finished = True
            return Kind.DONE, payload
        if kind == "error":
            return Kind.ERROR, payload
        if kind == "message_start" and self.envelope is None:
            message = payload.get("message")
            if isinstance(message, dict):
                self.envelope = {k: message[k] for k in ("id", "model") if k in message}
        return Kind.PREAMBLE, payload

    def error_event(self, message: str, code: str) -> bytes:
        error = {"type": "error", "error": {"type": "api_error", "message": message, "code": code}}
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
