"""The OpenAI Responses API dialect (``POST .../responses``): ``response`` objects with one
output item (an assistant message, or a reasoning item with ``reasoning``) and the typed,
sequence-numbered stream events, without ``[DONE]``. Prefill does not exist here."""

from __future__ import annotations

import functools
import time
from typing import Any, Final

import orjson

from omniroute.tools.fakeupstream import wire
from omniroute.tools.fakeupstream.dialect import NEW_ID, Dialect, sse

RESPONSE_ID: Final = "resp" + NEW_ID.decode()
MESSAGE_ID: Final = "msg" + NEW_ID.decode()
REASONING_ID: Final = "rs" + NEW_ID.decode()
_MALFORMED: Final = (
    b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": \n\n'
)


def _usage(n_chars: int, reasoning: bool) -> dict[str, Any]:
    out = wire.tokens(n_chars)
    return {
        "input_tokens": wire.PROMPT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": out if reasoning else 0},
        "total_tokens": wire.PROMPT_TOKENS + out,
    }


def _response(
    model: str, created: int, output: list[Any], usage: dict[str, Any] | None
) -> dict[str, Any]:
    """A ``response`` object: completed with its ``usage``, else in progress."""
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": created,
        "status": "in_progress" if usage is None else "completed",
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
    }


def _part(text: str, reasoning: bool) -> dict[str, Any]:
    if reasoning:
        return {"type": "summary_text", "text": text}
    return {"type": "output_text", "text": text, "annotations": []}


def _item(text: str | None, reasoning: bool) -> dict[str, Any]:
    """The output item: finished with ``text``, or just added (None: no content yet)."""
    parts = [] if text is None else [_part(text, reasoning)]
    if reasoning:
        return {"type": "reasoning", "id": REASONING_ID, "summary": parts}
    status = "in_progress" if text is None else "completed"
    return {
        "type": "message",
        "id": MESSAGE_ID,
        "status": status,
        "role": "assistant",
        "content": parts,
    }


@functools.lru_cache(maxsize=256)
def completion_body(model: str, answer: wire.Answer) -> bytes:
    text = answer.content
    output = [_item(text, answer.reasoning)]
    body = _response(model, int(time.time()), output, _usage(len(text), answer.reasoning))
    return orjson.dumps(body)


class _Events:
    """Builds one stream's events, numbering them in order."""

    def __init__(self, reasoning: bool) -> None:
        self.seq = 0
        self.reasoning = reasoning
        self.item_id = REASONING_ID if reasoning else MESSAGE_ID
        # Where the text goes in its item: a summary part or a content part.
        self.at = {"summary_index": 0} if reasoning else {"content_index": 0}

    def event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, **fields, "sequence_number": self.seq}
        self.seq += 1
        return sse(data)

    def part(self, stage: str, text: str) -> bytes:
        """The part (summary or content) event of ``stage``: added or done."""
        kind = "response.reasoning_summary_part." if self.reasoning else "response.content_part."
        where = {"item_id": self.item_id, "output_index": 0, **self.at}
        return self.event(kind + stage, **where, part=_part(text, self.reasoning))

    def text(self, stage: str, **fields: Any) -> bytes:
        """A text event of ``stage``: ``delta`` (with the piece) or ``done`` (with the text)."""
        kind = "response.reasoning_summary_text." if self.reasoning else "response.output_text."
        logprobs: dict[str, Any] = {} if self.reasoning else {"logprobs": []}
        where = {"item_id": self.item_id, "output_index": 0, **self.at}
        return self.event(kind + stage, **where, **fields, **logprobs)


@functools.lru_cache(maxsize=256)
def stream_events(model: str, answer: wire.Answer, size: int) -> wire.StreamEvents:
    text, reasoning = answer.content, answer.reasoning
    created = int(time.time())
    ev = _Events(reasoning)
    started = _response(model, created, [], None)
    head = (
        ev.event("response.created", response=started),
        ev.event("response.in_progress", response=started),
        ev.event("response.output_item.added", output_index=0, item=_item(None, reasoning)),
        ev.part("added", ""),
    )
    content = tuple(
        ev.text("delta", delta=text[start : start + size]) for start in range(0, len(text), size)
    )
    item = _item(text, reasoning)
    done = _response(model, created, [item], _usage(len(text), reasoning))
    tail = (
        ev.text("done", text=text),
        ev.part("done", text),
        ev.event("response.output_item.done", output_index=0, item=item),
        ev.event("response.completed", response=done),
    )
    return wire.StreamEvents(content, tail, head)


class Responses(Dialect):
    """OpenAI Responses: errors in the OpenAI shape, as for chat."""

    name = "responses"
    malformed = _MALFORMED

    def completion_body(self, model: str, answer: wire.Answer) -> bytes:
        return completion_body(model, answer)

    def stream_events(
        self, model: str, answer: wire.Answer, size: int, usage: bool
    ) -> wire.StreamEvents:
        return stream_events(model, answer, size)


RESPONSES: Final = Responses()
