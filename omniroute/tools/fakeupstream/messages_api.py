"""The Anthropic Messages API dialect (``POST .../messages``): ``message`` objects with one
content block (text, or thinking with ``reasoning``), the typed stream events without
``[DONE]``, the native assistant prefill and errors in the Anthropic shape."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omniroute.tools.fakeupstream import wire
from omniroute.tools.fakeupstream.dialect import NEW_ID, Dialect, sse

MESSAGE_ID: Final = "msg" + NEW_ID.decode()
SIGNATURE: Final = "fake"
_MALFORMED: Final = (
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": \n\n'
)
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error type for ``status`` (other 4xx: invalid_request_error, 5xx: api_error)."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def prefill_of(payload: Mapping[str, Any]) -> str | None:
    """The last message's text when it has role ``assistant``: its string content, or its
    content blocks' texts joined when they are all text blocks; else None."""
    messages = payload.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return None
    content = last.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    strings = [t for t in texts if isinstance(t, str)]
    return "".join(strings) if len(strings) == len(content) else None


def _block(text: str, reasoning: bool) -> dict[str, Any]:
    if reasoning:
        return {"type": "thinking", "thinking": text, "signature": SIGNATURE}
    return {"type": "text", "text": text}


def _message(model: str, content: list[Any], stop: str | None, out: int) -> dict[str, Any]:
    return {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": wire.PROMPT_TOKENS, "output_tokens": out},
    }


@functools.lru_cache(maxsize=256)
def completion_body(model: str, answer: wire.Answer) -> bytes:
    text = answer.content
    content = [_block(text, answer.reasoning)]
    return orjson.dumps(_message(model, content, "end_turn", wire.tokens(len(text))))


def _delta(delta: dict[str, str]) -> bytes:
    return sse({"type": "content_block_delta", "index": 0, "delta": delta})


@functools.lru_cache(maxsize=256)
def stream_events(model: str, answer: wire.Answer, size: int) -> wire.StreamEvents:
    text, reasoning = answer.content, answer.reasoning
    block = (
        {"type": "thinking", "thinking": "", "signature": ""} if reasoning else _block("", False)
    )
    head = (
        sse({"type": "message_start", "message": _message(model, [], None, 1)}),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        sse({"type": "ping"}),
    )
    kind, field = ("thinking_delta", "thinking") if reasoning else ("text_delta", "text")
    pieces = (text[start : start + size] for start in range(0, len(text), size))
    content = tuple(_delta({"type": kind, field: piece}) for piece in pieces)
    finish = {"stop_reason": "end_turn", "stop_sequence": None}
    usage = {"output_tokens": wire.tokens(len(text))}
    tail = (
        *([_delta({"type": "signature_delta", "signature": SIGNATURE})] if reasoning else []),
        sse({"type": "content_block_stop", "index": 0}),
        sse({"type": "message_delta", "delta": finish, "usage": usage}),
        sse({"type": "message_stop"}),
    )
    return wire.StreamEvents(content, tail, head)


class Messages(Dialect):
    """Anthropic Messages."""

    name = "messages"
    malformed = _MALFORMED

    def prefill_of(self, payload: Mapping[str, Any]) -> str | None:
        return prefill_of(payload)

    def completion_body(self, model: str, answer: wire.Answer) -> bytes:
        return completion_body(model, answer)

    def stream_events(
        self, model: str, answer: wire.Answer, size: int, usage: bool
    ) -> wire.StreamEvents:
        return stream_events(model, answer, size)

    def error_json(self, status: int, message: str, kind: str | None = None) -> bytes:
        """``{"type": "error", "error": {"type", "message"}}``."""
        error = {"type": kind or error_type(status), "message": message}
        return orjson.dumps({"type": "error", "error": error})


MESSAGES: Final = Messages()
