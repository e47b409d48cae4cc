"""What an Anthropic Messages stream has told the client so far, and how it is continued after
a cut (pure).

Events: ``message_start``, then per content block ``content_block_start``, its
``content_block_delta`` events and ``content_block_stop``, then ``message_delta`` (carrying the
``stop_reason``: the answer is finished) and ``message_stop`` (the stream's end); ``ping`` is a
heartbeat and ``error`` an in-band error. Every delta is a token (text, thinking, tool input), as
is the start of a tool-use block, which names the tool. The tokens come from the usage of
``message_start`` (``input_tokens``) and of ``message_delta`` (the final ``output_tokens``, and
``input_tokens`` when it repeats them).

An answer that is one text block so far can be continued: Anthropic models
take an assistant prefill natively. The continuation's text deltas go into the client's open
block; its own ``message_start``, block starts and pings are dropped, thinking is dropped, and a
tool call cannot be stitched into a text answer (:class:`NotSpliceable`).
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.domain.client.usage import count
from routing.domain.streams.sse import SseEvent
from routing.domain.streams.state import Kind, NotSpliceable, SentText, json_object

MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
_TEXT_BLOCK = 0  # the one block a continuable answer has


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class MessagesStream:
    """The state of one Messages stream (see the module docstring)."""

    __slots__ = ("continuable", "envelope", "finished", "text", "tokens_in", "tokens_out")
    end_event = MESSAGE_STOP

    def __init__(self) -> None:
        self.text = SentText()
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.finished = False
        self.continuable = True  # one text block so far
        self.envelope: dict[str, Any] | None = None  # the message's id and model

    def observe(self, event: SseEvent) -> tuple[Kind, dict[str, Any] | None]:
        data = event.data
        if data is None:
            return Kind.PREAMBLE, None
        payload = json_object(data)
        if payload is None:
            return Kind.MALFORMED, None
        kind = payload.get("type") or event.name
        if kind == "content_block_delta":
            delta = payload.get("delta")
            text = _text_delta(delta)
            if text is not None:
                self.text.append(text)
            else:
                self.continuable = False
            return Kind.TOKEN, payload
        if kind == "content_block_start":
            block = payload.get("content_block")
            is_text = isinstance(block, dict) and block.get("type") == "text"
            if not is_text or payload.get("index", 0) != _TEXT_BLOCK:
                self.continuable = False
            thinking = isinstance(block, dict) and block.get("type") == "thinking"
            return (Kind.PREAMBLE if is_text or thinking else Kind.TOKEN), payload
        if kind == "message_delta":
            if _stops(payload):
                self.finished = True
            self._count(payload.get("usage"))
            return Kind.USAGE, payload
        if kind == "message_stop":
            self.finished = True
            return Kind.DONE, payload
        if kind == "error":
            return Kind.ERROR, payload
        if kind == "message_start":
            message = payload.get("message")
            if type(message) is dict:
                if self.envelope is None:
                    self.envelope = {k: message[k] for k in ("id", "model") if k in message}
                self._count(message.get("usage"))
        return Kind.PREAMBLE, payload

    def _count(self, usage: Any) -> None:
        if type(usage) is dict:
            self.tokens_in = count(usage.get("input_tokens"), self.tokens_in)
            self.tokens_out = count(usage.get("output_tokens"), self.tokens_out)

    def error_event(self, message: str, code: str) -> bytes:
        error = {"type": "error", "error": {"type": "api_error", "message": message, "code": code}}
        return _event("error", error)


def _text_delta(delta: Any) -> str | None:
    """The text of a ``text_delta``, else ``None``."""
    if not isinstance(delta, dict) or delta.get("type") != "text_delta":
        return None
    text = delta.get("text")
    return text if isinstance(text, str) else ""


def _stops(payload: dict[str, Any]) -> bool:
    delta = payload.get("delta")
    return isinstance(delta, dict) and bool(delta.get("stop_reason"))


class MessagesSplicing:
    """Continuing a Messages stream (``routing.domain.streams.state.Splicing``)."""

    @staticmethod
    def content_of(payload: dict[str, Any] | None) -> str:
        if not payload or payload.get("type") != "content_block_delta":
            return ""
        return _text_delta(payload.get("delta")) or ""

    @staticmethod
    def continuation_event(
        payload: dict[str, Any], envelope: dict[str, Any] | None, *, skip: int = 0
    ) -> bytes | None:
        kind = payload.get("type")
        if kind == "content_block_delta":
            delta = payload.get("delta")
            text = _text_delta(delta)
            if text is None:
                if isinstance(delta, dict) and delta.get("type") in (
                    "thinking_delta",
                    "signature_delta",
                ):
                    return None
                raise NotSpliceable("the continuation calls a tool where the client has text")
            if not text[skip:]:
                return None
            moved = {"type": "text_delta", "text": text[skip:]}
            return _event(kind, {"type": kind, "index": _TEXT_BLOCK, "delta": moved})
        if kind == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") in ("text", "thinking"):
                return None  # the client's text block is open already
            raise NotSpliceable("the continuation calls a tool where the client has text")
        if kind == "message_delta":  # close the client's block, then finish the message
            stop = {"type": "content_block_stop", "index": _TEXT_BLOCK}
            return _event("content_block_stop", stop) + _event(kind, payload)
        if kind == "message_stop":
            return MESSAGE_STOP
        return None  # message_start, content_block_stop, ping: the client has its own

    @staticmethod
    def with_prefill(payload: dict[str, Any], text: str) -> tuple[dict[str, Any], int]:
        """The request with the text sent as an assistant prefill; Anthropic refuses a prefill
        ending in whitespace, so that is left for the continuation to repeat (and dropped)."""
        kept = text.rstrip()
        messages = [*payload["messages"], {"role": "assistant", "content": kept}]
        return {**payload, "messages": messages}, len(text) - len(kept)

    finishes = staticmethod(_stops)


MESSAGES_SPLICING = MessagesSplicing()
