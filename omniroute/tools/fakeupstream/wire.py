"""Response bodies and headers, pre-encoded and cached where possible.

Cached bodies carry the placeholder id :data:`ID`; callers swap in a per-request id of the
same width with ``bytes.replace``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, overload

import orjson
from aiohttp import web

from omniroute.tools.fakeupstream.behaviour import Behaviour

MODELS: Final = ("fake-model", "gpt-4o", "gpt-4o-mini")
ID: Final = b"chatcmpl-fake-000000000000"
DONE: Final = b"data: [DONE]\n\n"
MALFORMED: Final = b'data: {"choices": [\n\n'  # a truncated JSON object: not an event
PING: Final = b": ping\n\n"  # an SSE comment: bytes on the wire, no event
_BIG_EVENT: Final = (b'data: {"padding": "', b'"}\n\n')  # a JSON object saying nothing
# Both texts differ from their first character: a regeneration on ``alt`` never starts with
# what ``default`` already sent.
_TEXTS: Final = {
    "default": "The quick brown fox jumps over the lazy dog. ",
    "alt": "Pack my box with five dozen liquor jugs. ",
}
PREFILL_REJECTED: Final = (
    "assistant prefill is not supported: the conversation must not end with an assistant message"
)
PROMPT_TOKENS: Final = 8
# A chat stream with more text than this builds each event as it is written, never all of them
# at once (nor caches them): a 200 MB answer then costs the fake one event of memory.
LAZY_STREAM_CHARS: Final = 1024 * 1024
_ERROR_KINDS: Final = {
    400: ("invalid_request_error", "bad_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def request_id(n: int) -> bytes:
    """The id of the ``n``-th answer, as wide as :data:`ID`."""
    return b"chatcmpl-fake-%012d" % n


def content(n_chars: int, text: str = "default") -> str:
    """The deterministic answer text of ``n_chars`` characters (``text``: default or alt)."""
    base = _TEXTS[text]
    return (base * (n_chars // len(base) + 1))[:n_chars]


@dataclass(frozen=True, slots=True)
class Answer:
    """What one answer says: the full text of ``n_chars`` characters from its first ``skip``
    (the length of an accepted assistant prefill), as content or as reasoning."""

    n_chars: int
    text: str = "default"
    skip: int = 0
    reasoning: bool = False

    @property
    def content(self) -> str:
        return content(self.n_chars, self.text)[self.skip :]

    def piece(self, start: int, size: int) -> str:
        """``content[start:start + size]``, without building the whole text."""
        first = self.skip + start
        end = min(first + size, self.n_chars)
        if end <= first:
            return ""
        base = _TEXTS[self.text]
        offset = first % len(base)
        return (base * ((offset + end - first) // len(base) + 1))[offset : offset + end - first]

    def delta(self, piece: str) -> dict[str, str]:
        return {"reasoning_content" if self.reasoning else "content": piece}


class StreamEvents(NamedTuple):
    """A stream's content events, then its tail (the finish event and the usage event); and
    its head: the events before the first content event (none in chat completions)."""

    content: Sequence[bytes]
    tail: tuple[bytes, ...]
    head: tuple[bytes, ...] = ()


# An error body from (status, message, error type or None for the status's default).
ErrorEncoder = Callable[[int, str, str | None], bytes]


def prefill_of(payload: Mapping[str, Any]) -> str | None:
    """The assistant prefill of a request: the last message's string content when that
    message has role ``assistant``, else None."""
    messages = payload.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return None
    text = last.get("content")
    return text if isinstance(text, str) else None


@functools.lru_cache(maxsize=2)
def big_event(n_bytes: int) -> bytes:
    """One event of ``n_bytes`` bytes (at least its 23-byte frame): a JSON object whose only
    field is a ``padding`` string; it carries no text, finish or usage."""
    start, end = _BIG_EVENT
    return start + b"x" * max(n_bytes - len(start) - len(end), 0) + end


def tokens(n_chars: int) -> int:
    """The completion tokens counted for ``n_chars`` characters: one per four, rounded up."""
    return (n_chars + 3) // 4


def _usage(n_chars: int) -> dict[str, int]:
    completion = tokens(n_chars)
    return {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": PROMPT_TOKENS + completion,
    }


def _envelope(model: str, kind: str, **rest: Any) -> dict[str, Any]:
    return {"id": ID.decode(), "object": kind, "created": int(time.time()), "model": model, **rest}


@functools.lru_cache(maxsize=256)
def completion_body(model: str, answer: Answer) -> bytes:
    """A ``chat.completion`` JSON answering ``answer`` (``content`` null when reasoning)."""
    text = answer.content
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if answer.reasoning:
        message = {"role": "assistant", "content": None, "reasoning_content": text}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    env = _envelope(model, "chat.completion", choices=[choice], usage=_usage(len(text)))
    return orjson.dumps(env)


_TEXT_MARK: Final = "\u2063fake-text\u2063"  # never in a generated text


def completion_around(model: str, answer: Answer) -> tuple[bytes, bytes]:
    """The ``chat.completion`` JSON of ``answer`` without its text: what goes before it and
    after it (the texts need no JSON escaping), for a long answer written piece by piece."""
    body = completion_body(model, Answer(0, reasoning=answer.reasoning))
    n_chars = max(answer.n_chars - answer.skip, 0)
    parsed = orjson.loads(body)
    message = parsed["choices"][0]["message"]
    message["reasoning_content" if answer.reasoning else "content"] = _TEXT_MARK
    parsed["usage"] = _usage(n_chars)
    before, _, after = orjson.dumps(parsed).partition(_TEXT_MARK.encode())
    return before, after


def _event(model: str, choices: list[Any], **rest: Any) -> bytes:
    env = _envelope(model, "chat.completion.chunk", choices=choices, **rest)
    return b"data: " + orjson.dumps(env) + b"\n\n"


def _content_event(model: str, answer: Answer, size: int, i: int) -> bytes:
    delta: dict[str, str] = answer.delta(answer.piece(i * size, size))
    delta = {"role": "assistant", **delta} if i == 0 else delta
    return _event(model, [{"index": 0, "delta": delta, "finish_reason": None}])


class LazyEvents(Sequence[bytes]):
    """The content events of a long chat stream, each built when it is read."""

    def __init__(self, model: str, answer: Answer, size: int, indices: range) -> None:
        self._model, self._answer, self._size, self._indices = model, answer, size, indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> LazyEvents: ...
    def __getitem__(self, index: int | slice) -> bytes | LazyEvents:
        if isinstance(index, slice):
            return LazyEvents(self._model, self._answer, self._size, self._indices[index])
        return _content_event(self._model, self._answer, self._size, self._indices[index])


@functools.lru_cache(maxsize=256)
def stream_events(model: str, answer: Answer, size: int, usage: bool) -> StreamEvents:
    """One content event per ``size`` characters of ``answer`` (the last may be shorter), the
    finish event and, with ``usage``, the usage event; ``[DONE]`` is the caller's. Past
    :data:`LAZY_STREAM_CHARS` the content events are built one by one as they are read."""
    n_chars = max(answer.n_chars - answer.skip, 0)
    indices = range(-(-n_chars // size))
    events: Sequence[bytes] = LazyEvents(model, answer, size, indices)
    if n_chars <= LAZY_STREAM_CHARS:
        events = tuple(events)
    tail = [_event(model, [{"index": 0, "delta": {}, "finish_reason": "stop"}])]
    if usage:
        tail.append(_event(model, [], usage=_usage(n_chars)))
    return StreamEvents(events, tuple(tail))


@functools.lru_cache(maxsize=1)
def models_body() -> bytes:
    """The ``GET /v1/models`` answer."""
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in MODELS]
    return orjson.dumps({"object": "list", "data": data})


def headers(b: Behaviour, content_type: str) -> dict[str, str]:
    """Response headers: content type, ``Retry-After`` and the extra ``headers`` knob."""
    out = {"Content-Type": content_type, **b.headers}
    if b.retry_after is not None:
        out["Retry-After"] = b.retry_after
    return out


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


def error_json(status: int, message: str, kind: str | None = None) -> bytes:
    """An OpenAI error body: ``{"error": {"message", "type", "code"}}``."""
    default = ("server_error", "server_error") if status >= 500 else ("invalid_request_error", None)
    etype, code = _ERROR_KINDS.get(status, default)
    return orjson.dumps({"error": {"message": message, "type": kind or etype, "code": code}})


def error(
    status: int, message: str, kind: str | None = None, encode: ErrorEncoder = error_json
) -> web.Response:
    """An error answer, OpenAI-style unless ``encode`` says otherwise."""
    body = encode(status, message, kind)
    return web.Response(status=status, body=body, content_type="application/json")


def error_answer(b: Behaviour, encode: ErrorEncoder = error_json) -> web.Response:
    """The answer for a non-2xx ``status`` (its body from ``encode``) or an explicit ``body``."""
    if b.body is None:
        body = encode(b.status, f"fake upstream error {b.status}", None)
        return web.Response(status=b.status, body=body, headers=headers(b, "application/json"))
    is_json = b.body.lstrip().startswith(("{", "["))
    ctype = "application/json" if is_json else "text/plain; charset=utf-8"
    return web.Response(status=b.status, body=b.body.encode(), headers=headers(b, ctype))
