"""What the hostile-input tests share: each wire format's error shape, and a timed request."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

OPENAI, ANTHROPIC = "openai", "anthropic"
MESSAGES = [{"role": "user", "content": "x"}]
ANSWER_SECONDS = 1.0  # every hostile request is answered within this, loosely


@dataclass(frozen=True)
class Surface:
    """A /v1 endpoint: its path, the wire format of its errors and of its route's upstream,
    and the upstream path the fake records for it."""

    name: str
    path: str
    wire_format: str
    upstream_path: str

    def body(self, model: str, **extra: Any) -> dict[str, Any]:
        if self.name == "responses":
            return {"model": model, "input": "x", **extra}
        if self.name == "messages":
            return {"model": model, "max_tokens": 8, "messages": MESSAGES, **extra}
        return {"model": model, "messages": MESSAGES, **extra}


CHAT = Surface("chat", "/v1/chat/completions", OPENAI, "/chat/completions")
RESPONSES = Surface("responses", "/v1/responses", OPENAI, "/responses")
MESSAGES_API = Surface("messages", "/v1/messages", ANTHROPIC, "/messages")
SURFACES = (CHAT, RESPONSES, MESSAGES_API)


def assert_wire_error(response: httpx.Response, status: int, wire_format: str) -> dict[str, Any]:
    """``response`` is a ``status`` JSON error in ``wire_format``'s shape (no traceback); the
    error object."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    error = body["error"]
    assert isinstance(error["message"], str) and error["message"]
    if wire_format == ANTHROPIC:
        assert body["type"] == "error", body
        assert isinstance(error["type"], str) and error["type"]
    else:
        assert "type" not in body or body["type"] != "error", body
        assert isinstance(error["type"], str) and "code" in error
    assert "Traceback" not in response.text
    return dict(error)


def timed(send: Any, *args: Any, **kwargs: Any) -> tuple[httpx.Response, float]:
    """The response of ``send(*args, **kwargs)`` and the seconds it took."""
    started = time.perf_counter()
    response = send(*args, **kwargs)
    return response, time.perf_counter() - started
