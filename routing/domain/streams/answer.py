"""A plain answer replayed as a stream, in the client API's own events (pure).

When a fusion panel yields exactly one answer it is returned as it is; a
client that asked for a stream gets that answer as a short, complete stream: its
text in one delta, between the API's opening and closing events, so any streaming client
library reads it as it reads an upstream's stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from routing.domain.client import endpoints

Payload = dict[str, Any]


def _data(payload: Payload) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _named(name: str, payload: Payload) -> bytes:
    return b"event: " + name.encode() + b"\n" + _data({"type": name, **payload})


def chat_events(answer: Payload, text: str) -> bytes:
    """``chat.completion.chunk`` events: the role and the text, the finish (and the usage
    block when the answer had one), then ``[DONE]``."""
    choices = answer.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    base = {
        "id": answer.get("id", "chatcmpl-gateway"),
        "object": "chat.completion.chunk",
        "created": answer.get("created", 0),
        "model": answer.get("model", ""),
    }
    delta = {"role": "assistant", "content": text}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish or "stop"}]},
    ]
    if isinstance(answer.get("usage"), dict):
        chunks.append({**base, "choices": [], "usage": answer["usage"]})
    return b"".join(map(_data, chunks)) + b"data: [DONE]\n\n"


def messages_events(answer: Payload, text: str) -> bytes:
    """Messages events: ``message_start``, one text block, ``message_delta`` with the stop
    reason and usage, ``message_stop``."""
    given = answer.get("usage")
    usage: Payload = given if isinstance(given, dict) else {}
    started = {
        **{k: v for k, v in answer.items() if k not in ("content", "stop_reason", "usage")},
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 0},
    }
    stop = {
        "stop_reason": answer.get("stop_reason") or "end_turn",
        "stop_sequence": answer.get("stop_sequence"),
    }
    steps: list[tuple[str, Payload]] = [
        ("message_start", {"message": started}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"index": 0}),
        (
            "message_delta",
            {"delta": stop, "usage": {"output_tokens": usage.get("output_tokens", 0)}},
        ),
        ("message_stop", {}),
    ]
    return b"".join(_named(name, payload) for name, payload in steps)


def responses_events(answer: Payload, text: str) -> bytes:
    """Responses events, each with its ``sequence_number``: created, the output message and
    its text part, one delta, the done events and ``response.completed`` with the answer."""
    opened = {**answer, "status": "in_progress", "output": []}
    item_id = "msg_gateway"
    output = answer.get("output")
    for item in output if isinstance(output, list) else ():
        if isinstance(item, dict) and item.get("type") == "message":
            item_id = str(item.get("id", item_id))
            break
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    steps: list[tuple[str, Payload]] = [
        ("response.created", {"response": opened}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
        ),
        ("response.content_part.added", {**at, "part": {**part, "text": ""}}),
        ("response.output_text.delta", {**at, "delta": text}),
        ("response.output_text.done", {**at, "text": text}),
        ("response.content_part.done", {**at, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": answer}),
    ]
    return b"".join(
        _named(name, {"sequence_number": number, **payload})
        for number, (name, payload) in enumerate(steps)
    )


_EVENTS: dict[str, Callable[[Payload, str], bytes]] = {
    endpoints.CHAT_COMPLETIONS.name: chat_events,
    endpoints.MESSAGES.name: messages_events,
    endpoints.RESPONSES.name: responses_events,
}


def answer_as_stream(endpoint_name: str, answer: Payload, text: str) -> bytes:
    """``answer`` (whose text is ``text``) as the whole stream of the client API
    ``endpoint_name`` (one of the three the gateway serves)."""
    return _EVENTS[endpoint_name](answer, text)
