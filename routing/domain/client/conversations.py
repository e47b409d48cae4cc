"""How each client API carries a conversation, for the dispatch preludes (pure).

The fusion and pipeline strategies read the text of an
upstream's answer and add turns to a client's request, in the shape of the client API asked:

* Chat Completions: the answer is ``choices[0].message.content`` (a string, or text parts);
  turns are appended to ``messages``;
* Messages: the answer is the text blocks of ``content``, joined; turns are appended to
  ``messages`` (Anthropic merges consecutive turns of one role);
* Responses: the answer is ``output_text`` when the upstream gives it, else the text parts of
  its ``output`` messages; turns are appended to ``input`` (a string input becomes the first
  user turn of a list).

Everything else in the request is kept as the client sent it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from routing.domain.client import endpoints

Turn = tuple[str, str]
"""A turn to add: its role (``user``, ``assistant``) and its text."""

Payload = dict[str, Any]


def _joined(parts: Any, kind: str) -> str | None:
    """The text of the parts of type ``kind`` in a list of content parts, joined."""
    if not isinstance(parts, list):
        return None
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, dict) and part.get("type") == kind and isinstance(part.get("text"), str)
    ]
    return "".join(texts) if texts else None


def chat_answer_text(answer: Payload) -> str | None:
    """``choices[0].message.content`` of a Chat Completions answer (``None``: no text)."""
    choices = answer.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    return _joined(content, "text")


def messages_answer_text(answer: Payload) -> str | None:
    """The text blocks of a Messages answer's ``content``, joined (``None``: no text)."""
    return _joined(answer.get("content"), "text")


def responses_answer_text(answer: Payload) -> str | None:
    """A Responses answer's ``output_text``, else the text of its output messages."""
    given = answer.get("output_text")
    if isinstance(given, str) and given:
        return given
    output = answer.get("output")
    if not isinstance(output, list):
        return None
    texts = [
        text
        for item in output
        if isinstance(item, dict) and item.get("type") == "message"
        for text in [_joined(item.get("content"), "output_text")]
        if text is not None
    ]
    return "".join(texts) if texts else None


def _with_messages(payload: Payload, turns: Sequence[Turn]) -> Payload:
    given = payload.get("messages")
    messages = list(given) if isinstance(given, list) else []
    messages += [{"role": role, "content": text} for role, text in turns]
    return {**payload, "messages": messages}


def _with_input(payload: Payload, turns: Sequence[Turn]) -> Payload:
    given = payload.get("input")
    if isinstance(given, str):
        items: list[Any] = [{"role": "user", "content": given}]
    else:
        items = list(given) if isinstance(given, list) else []
    items += [{"role": role, "content": text} for role, text in turns]
    return {**payload, "input": items}


@dataclass(frozen=True, slots=True)
class Conversation:
    """How one client API's answers and requests carry a conversation."""

    answer_text: Callable[[Payload], str | None]  # the text of a plain (non-stream) answer
    with_turns: Callable[[Payload, Sequence[Turn]], Payload]  # a request with turns appended


CHAT = Conversation(chat_answer_text, _with_messages)
MESSAGES = Conversation(messages_answer_text, _with_messages)
RESPONSES = Conversation(responses_answer_text, _with_input)

# By the client API's name (``Endpoint.name``).
CONVERSATIONS: dict[str, Conversation] = {
    endpoints.CHAT_COMPLETIONS.name: CHAT,
    endpoints.MESSAGES.name: MESSAGES,
    endpoints.RESPONSES.name: RESPONSES,
}


def conversation_for(endpoint_name: str) -> Conversation | None:
    """The conversation shape of a client API, ``None`` for one the preludes cannot shape."""
    return CONVERSATIONS.get(endpoint_name)
