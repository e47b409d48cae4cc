"""What an OpenAI Responses stream has told the client so far (pure).

Every event carries its ``type`` (also on its ``event:`` line) and a ``sequence_number``. Any
``*.delta`` event is a token (output text, reasoning, tool-call arguments); the answer is
finished, and the stream ends, with ``response.completed`` or ``response.incomplete``, whose
``response.usage`` gives the tokens;
``response.failed`` and ``error`` are in-band errors. There is no ``[DONE]``.

A cut Responses stream is never continued: its events carry item ids and sequence numbers that a
second answer cannot take over, so a break after commit ends with an ``error`` event.
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.domain.client.usage import usage_tokens
from routing.domain.streams.sse import SseEvent
from routing.domain.streams.state import Kind, SentText, json_object

TEXT_DELTA = "response.output_text.delta"
MAX_SEQUENCE = 2**63 - 1  # the gateway's own error event numbers one past the last it kept
_FINISHED = frozenset({"response.completed", "response.incomplete"})
_ERRORS = frozenset({"error", "response.failed"})


class ResponsesStream:
    """The state of one Responses stream (see the module docstring)."""

    __slots__ = ("envelope", "finished", "sequence", "text", "tokens_in", "tokens_out")
    continuable = False
    end_event = b""

    def __init__(self) -> None:
        self.text = SentText()
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.finished = False
        self.envelope: dict[str, Any] | None = None  # the response's id and model
        self.sequence = -1  # the last sequence number seen

    def observe(self, event: SseEvent) -> tuple[Kind, dict[str, Any] | None]:
        data = event.data
        if data is None:
            return Kind.PREAMBLE, None
        if data == b"[DONE]":  # no Responses event: the end only once the answer completed
            return (Kind.DONE, None) if self.finished else (Kind.MALFORMED, None)
        payload = json_object(data)
        if payload is None:
            return Kind.MALFORMED, None
        kind = payload.get("type") or event.name or ""
        if type(kind) is not str:  # a type that is no string names no event
            return Kind.MALFORMED, None
        sequence = payload.get("sequence_number")
        if type(sequence) is int and 0 <= sequence < MAX_SEQUENCE:  # the next one must fit
            self.sequence = sequence
        if kind.endswith(".delta"):
            delta = payload.get("delta")
            if kind == TEXT_DELTA and type(delta) is str:
                self.text.append(delta)
            return Kind.TOKEN, payload
        if kind in _FINISHED:
            self.finished = True
            response = payload.get("response")
            if type(response) is dict:
                self.tokens_in, self.tokens_out = usage_tokens(response.get("usage"))
            return Kind.DONE, payload
        if kind in _ERRORS:
            return Kind.ERROR, payload
        if kind == "response.created" and self.envelope is None:
            self.envelope = _identity(payload.get("response"))
        return Kind.PREAMBLE, payload

    def error_event(self, message: str, code: str) -> bytes:
        """An ``error`` event numbered after the last event the client has."""
        error = {
            "type": "error",
            "code": code,
            "message": message,
            "param": None,
            "sequence_number": self.sequence + 1,
        }
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"


def _identity(response: Any) -> dict[str, Any] | None:
    if not isinstance(response, dict) or not isinstance(response.get("id"), str):
        return None
    return {k: response[k] for k in ("id", "model") if k in response}
