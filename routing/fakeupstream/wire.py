"""Response bodies and headers, pre-encoded and cached where possible.

Cached bodies carry the placeholder id :data:`ID`; callers swap in a per-request id of the
same width with ``bytes.replace``.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Final

import orjson
from aiohttp import web

from routing.fakeupstream.behaviour import Behaviour

MODELS: Final = ("fake-model", "gpt-4o", "gpt-4o-mini")
ID: Final = b"chatcmpl-fake-000000000000"
DONE: Final = b"data: [DONE]\n\n"
_TEXT: Final = "The quick brown fox jumps over the lazy dog. "
_PROMPT_TOKENS: Final = 8
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


def content(n_chars: int) -> str:
    """The deterministic answer text of ``n_chars`` characters."""
    return (_TEXT * (n_chars // len(_TEXT) + 1))[:n_chars]


def _usage(n_chars: int) -> dict[str, int]:
    completion = (n_chars + 3) // 4
    return {
        "prompt_tokens": _PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": _PROMPT_TOKENS + completion,
    }


def _envelope(model: str, kind: str, **rest: Any) -> dict[str, Any]:
    return {"id": ID.decode(), "object": kind, "created": int(time.time()), "model": model, **rest}


@functools.lru_cache(maxsize=256)
def completion_body(model: str, n_chars: int) -> bytes:
    """A ``chat.completion`` JSON answering ``content(n_chars)``."""
    message = {"role": "assistant", "content": content(n_chars)}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    env = _envelope(model, "chat.completion", choices=[choice], usage=_usage(n_chars))
    return orjson.dumps(env)


def _event(model: str, choices: list[Any], **rest: Any) -> bytes:
    env = _envelope(model, "chat.completion.chunk", choices=choices, **rest)
    return b"data: " + orjson.dumps(env) + b"\n\n"


@functools.lru_cache(maxsize=256)
def stream_events(model: str, chunks: int, size: int, usage: bool) -> tuple[bytes, ...]:
    """``chunks`` content events, the finish event, [the usage event] and ``[DONE]``."""
    text = content(chunks * size)
    events = []
    for i in range(chunks):
        delta = {"content": text[i * size : (i + 1) * size]}
        delta = {"role": "assistant", **delta} if i == 0 else delta
        events.append(_event(model, [{"index": 0, "delta": delta, "finish_reason": None}]))
    events.append(_event(model, [{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    if usage:
        events.append(_event(model, [], usage=_usage(chunks * size)))
    return (*events, DONE)


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


def _error_json(status: int, message: str, kind: str | None = None) -> bytes:
    default = ("server_error", "server_error") if status >= 500 else ("invalid_request_error", None)
    etype, code = _ERROR_KINDS.get(status, default)
    return orjson.dumps({"error": {"message": message, "type": kind or etype, "code": code}})


def error(status: int, message: str, kind: str | None = None) -> web.Response:
    """An OpenAI-style error answer."""
    body = _error_json(status, message, kind)
    return web.Response(status=status, body=body, content_type="application/json")


def error_answer(b: Behaviour) -> web.Response:
    """The answer for a non-2xx ``status`` or an explicit ``body``."""
    if b.body is None:
        body = _error_json(b.status, f"fake upstream error {b.status}")
        return web.Response(status=b.status, body=body, headers=headers(b, "application/json"))
    is_json = b.body.lstrip().startswith(("{", "["))
    ctype = "application/json" if is_json else "text/plain; charset=utf-8"
    return web.Response(status=b.status, body=b.body.encode(), headers=headers(b, ctype))
