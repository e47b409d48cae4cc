"""What a Chat Completions stream has told the client so far (pure).

The relay reads each upstream event through :class:`ChatStream`, which says what kind of event it
is and keeps what recovery needs after a cut: the assistant text already sent, whether the
answer finished, the tokens its usage block reported, and whether a continuation could be
stitched on at all (a single choice and no tool call in flight).

The gateway asks every streamed chat request for its usage block
(``routing.domain.client.requests.ask_for_usage``). For a client that did not ask for it
(``hide_usage``) the usage is removed from the event as it is read: the usage-only chunk
(``choices: []``, sent before ``[DONE]``) is sent as nothing, and a chunk carrying choices and
usage loses its ``usage`` key. The event still counts as usage for the idle limit. A ``usage:
null`` (OpenAI's on every other chunk) is left as it is. The helpers below build the events of a
continuation so that the client sees one stream: the first stream's ``id`` and ``model``, no
second ``role`` delta, and, after a regeneration, only the text the client does not have yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from routing.domain.client.usage import count
from routing.domain.streams.sse import DONE_EVENT, SseEvent
from routing.domain.streams.state import Kind, SentText, json_object

__all__ = [
    "CHAT_SPLICING",
    "ChatStream",
    "Kind",
    "content_of",
    "continuation_event",
    "error_event",
    "finishes",
    "with_prefill",
]

_ENVELOPE = ("id", "object", "created", "model")
_TOKEN_FIELDS = frozenset({"content", "reasoning_content", "reasoning", "text"})
_STOP_CONTINUATION = frozenset({"tool_calls", "function_call", "refusal"})


@dataclass(slots=True)
class ChatStream:
    """The state of one client's stream, across every upstream segment that fed it."""

    text: SentText = field(default_factory=SentText)  # assistant content sent, in order
    finished: bool = False  # a choice carried ``finish_reason``
    hide_usage: bool = False  # the client did not ask for the usage block: it is removed
    tokens_in: int | None = None  # the usage block's prompt_tokens, once one came
    tokens_out: int | None = None  # its completion_tokens
    continuable: bool = True  # one choice, no tool call, no refusal: a suffix can be stitched
    reasoning: bool = False  # reasoning deltas were sent
    envelope: dict[str, Any] | None = None  # id / object / created / model of the first chunk
    open_choices: set[int] = field(default_factory=set)  # choices seen without a finish
    end_event: ClassVar[bytes] = DONE_EVENT

    def error_event(self, message: str, code: str) -> bytes:
        return error_event(message, code)

    @property
    def sent_text(self) -> str:
        return "".join(self.text)

    def observe(self, event: SseEvent) -> tuple[Kind, dict[str, Any] | None]:
        """Classify ``event`` and record what it sends; returns its kind and parsed payload."""
        data = event.data
        if data is None:
            return Kind.PREAMBLE, None
        if data == b"[DONE]":
            return Kind.DONE, None
        payload = json_object(data)
        if payload is None:
            return Kind.MALFORMED, None
        if payload.get("error"):
            return Kind.ERROR, payload
        if self.envelope is None and "id" in payload:
            self.envelope = {
                k: payload[k] for k in ("id", "object", "created", "model") if k in payload
            }
        kind = Kind.PREAMBLE
        usage = payload.get("usage")
        if usage:
            kind = Kind.USAGE
            if type(usage) is dict:
                self.tokens_in = count(usage.get("prompt_tokens"), self.tokens_in)
                self.tokens_out = count(usage.get("completion_tokens"), self.tokens_out)
            if self.hide_usage:
                _hide_usage(event, payload)
        return self._read_choices(payload, kind), payload

    def _read_choices(self, payload: dict[str, Any], kind: Kind) -> Kind:
        choices = payload.get("choices")
        if type(choices) is not list:
            return kind
        if len(choices) == 1 and kind is Kind.PREAMBLE:  # most events: one text delta
            text = _plain_text(choices[0])
            if text:
                self.text.append(text)
                return Kind.TOKEN
        finishing = False
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if type(index) is not int:  # relayed as it came, but not followed: never stitched
                self.continuable = False
                continue
            if index != 0:
                self.continuable = False
            if choice.get("finish_reason"):
                self.open_choices.discard(index)
                finishing = True
            else:
                self.open_choices.add(index)
            delta = choice.get("delta")
            if isinstance(delta, dict) and delta and self._read_delta(delta):
                kind = Kind.TOKEN
        if finishing and not self.open_choices:  # every choice seen has finished
            self.finished = True
        return kind

    def _read_delta(self, delta: dict[str, Any]) -> bool:
        token = False
        for name, value in delta.items():
            if name in _STOP_CONTINUATION and value:
                token, self.continuable = True, False
            elif name in _TOKEN_FIELDS and value and isinstance(value, str):
                token = True
                if name == "content":
                    self.text.append(value)
                elif name != "text":
                    self.reasoning = True
        return token


def _hide_usage(event: SseEvent, payload: dict[str, Any]) -> None:
    """``event`` without its usage block: nothing when it carried no choice, else its chunk
    written again without ``usage`` (``payload`` loses it too, for a continuation)."""
    del payload["usage"]
    event.raw = b"data: " + orjson.dumps(payload) + b"\n\n" if payload.get("choices") else b""


def _plain_text(choice: Any) -> str | None:
    """The text of a first choice carrying nothing but text (no finish), else ``None``."""
    if type(choice) is not dict or choice.get("finish_reason") or choice.get("index", 0):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    text = delta.get("content")
    return text if type(text) is str else None


def content_of(payload: dict[str, Any] | None) -> str:
    """The assistant text one chunk carries (first choice)."""
    if not payload:
        return ""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta")
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


def continuation_event(
    payload: dict[str, Any], envelope: dict[str, Any] | None, *, skip: int = 0
) -> bytes | None:
    """A continuation chunk as the client's stream carries it: the first stream's envelope, no
    ``role`` and no reasoning, and the first ``skip`` characters of its text dropped (they
    duplicate what the client has). ``None`` when nothing is left to send."""
    chunk = {**payload, **(envelope or {})}
    choices = []
    for choice in _choices(chunk):
        if not isinstance(choice, dict):
            continue
        given = choice.get("delta")
        delta = dict(given) if isinstance(given, dict) else {}
        for name in ("role", "reasoning_content", "reasoning"):
            delta.pop(name, None)
        content = delta.get("content")
        if skip and isinstance(content, str):
            delta["content"] = content[skip:]
            if not delta["content"]:
                del delta["content"]
        if delta or choice.get("finish_reason"):
            choices.append({**choice, "delta": delta})
    if not choices and not chunk.get("usage"):
        return None
    chunk["choices"] = choices
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def with_prefill(payload: dict[str, Any], text: str) -> dict[str, Any]:
    """The request again, with the text already sent as an assistant message to continue."""
    messages = [*payload["messages"], {"role": "assistant", "content": text}]
    return {**payload, "messages": messages}


def finishes(payload: dict[str, Any]) -> bool:
    """Whether a chunk carries a ``finish_reason``."""
    return any(isinstance(c, dict) and c.get("finish_reason") for c in _choices(payload))


def _choices(payload: dict[str, Any]) -> list[Any]:
    """A chunk's ``choices``; none when it is no list (relayed as it came, never read)."""
    choices = payload.get("choices")
    return choices if isinstance(choices, list) else []


class ChatSplicing:
    """Continuing a Chat Completions stream (``routing.domain.streams.state.Splicing``)."""

    content_of = staticmethod(content_of)
    continuation_event = staticmethod(continuation_event)
    finishes = staticmethod(finishes)

    @staticmethod
    def with_prefill(payload: dict[str, Any], text: str) -> tuple[dict[str, Any], int]:
        return with_prefill(payload, text), 0


CHAT_SPLICING = ChatSplicing()


def error_event(message: str, code: str) -> bytes:
    """An in-band error event ending a Chat Completions stream (never followed by [DONE])."""
    error = {"message": message, "type": "upstream_error", "code": code}
    return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
