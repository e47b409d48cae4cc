"""What a client's request needs of a model (pure): tools, structured output, and room in the
context window. Planning skips the targets whose catalog entry says they cannot give it
(capability / context-window compatibility filtering).

The input size is an estimate made without a tokenizer: the UTF-8 bytes of the prompt's text
divided by 4, rounded up (about four bytes a token for English text and code). The text is
every string the model reads as prompt: message contents and text parts, system prompts and
Responses ``instructions``, tool-call arguments and tool results. Images, files and tool
declarations are not counted, so the estimate errs low: a target is skipped only when even
this estimate plus the requested output does not fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

BYTES_PER_TOKEN = 4
# The keys under which a request carries prompt text (a message's "content", a part's "text",
# a tool call's "arguments", a tool result's "output", an Anthropic tool use's "input", ...).
_TEXT_KEYS = frozenset(
    {
        "content",
        "text",
        "input",
        "output",
        "arguments",
        "instructions",
        "system",
        "tool_calls",
        "function",
    }
)
_STRUCTURED_CHAT = frozenset({"json_schema", "json_object"})
_STRUCTURED_RESPONSES = frozenset({"json_schema"})


@dataclass(frozen=True, slots=True)
class RequestNeeds:
    """What a request needs of a target: ``tools`` (it declares tools and lets the model call
    them), ``structured_output`` (a JSON schema or JSON mode answer), and ``input_tokens`` (the
    estimate above) plus ``max_output_tokens`` (``None``: not asked) of context window."""

    tools: bool = False
    structured_output: bool = False
    input_tokens: int = 0
    max_output_tokens: int | None = None

    @property
    def context_tokens(self) -> int:
        """The context window this request needs at least."""
        return self.input_tokens + (self.max_output_tokens or 0)


NO_NEEDS = RequestNeeds()


def chat_needs(payload: Mapping[str, Any]) -> RequestNeeds:
    """A Chat Completions request's needs (``max_completion_tokens``, else ``max_tokens``)."""
    output = _positive(payload.get("max_completion_tokens"))
    return RequestNeeds(
        tools=_uses_tools(payload),
        structured_output=_format_type(payload.get("response_format")) in _STRUCTURED_CHAT,
        input_tokens=estimate_tokens([payload.get("messages")]),
        max_output_tokens=output if output is not None else _positive(payload.get("max_tokens")),
    )


def responses_needs(payload: Mapping[str, Any]) -> RequestNeeds:
    """A Responses request's needs (structured output: ``text.format`` of type
    ``json_schema``)."""
    text = payload.get("text")
    text_format = text.get("format") if isinstance(text, Mapping) else None
    return RequestNeeds(
        tools=_uses_tools(payload),
        structured_output=_format_type(text_format) in _STRUCTURED_RESPONSES,
        input_tokens=estimate_tokens([payload.get("instructions"), payload.get("input")]),
        max_output_tokens=_positive(payload.get("max_output_tokens")),
    )


def messages_needs(payload: Mapping[str, Any]) -> RequestNeeds:
    """An Anthropic Messages request's needs (its API has no structured-output switch)."""
    return RequestNeeds(
        tools=_uses_tools(payload),
        input_tokens=estimate_tokens([payload.get("system"), payload.get("messages")]),
        max_output_tokens=_positive(payload.get("max_tokens")),
    )


def estimate_tokens(values: Iterable[Any]) -> int:
    """The estimated tokens of the prompt text in ``values`` (see the module's docstring)."""
    return math.ceil(sum(_text_bytes(value) for value in values) / BYTES_PER_TOKEN)


def _text_bytes(root: Any) -> int:
    """UTF-8 bytes of the prompt text under ``root``; iterative, so deep nesting is harmless.

    Every request's messages pass here, a coding agent's hundreds of them: the exact types
    parsed JSON holds are tried first (``isinstance`` against ``Mapping`` is an ABC check), and
    ASCII text is measured without encoding a copy."""
    total, pending = 0, [root]
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind is str or isinstance(value, str):
            total += len(value) if value.isascii() else len(value.encode())
        elif kind is list or isinstance(value, list):
            pending.extend(value)
        elif kind is dict or isinstance(value, Mapping):
            for key, item in value.items():
                if key not in _TEXT_KEYS:
                    continue
                if key == "input" and isinstance(item, Mapping):  # a tool use's arguments
                    total += _json_bytes(item)
                else:
                    pending.append(item)
    return total


def _json_bytes(value: Mapping[str, Any]) -> int:
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # nested past orjson's depth limit: not worth a refusal
        return 0


def _uses_tools(payload: Mapping[str, Any]) -> bool:
    """Non-empty ``tools`` and a ``tool_choice`` other than none (``"none"`` in OpenAI's APIs,
    ``{"type": "none"}`` in Anthropic's)."""
    tools, choice = payload.get("tools"), payload.get("tool_choice")
    if not isinstance(tools, list) or not tools:
        return False
    return choice != "none" and not (isinstance(choice, Mapping) and choice.get("type") == "none")


def _format_type(value: Any) -> str | None:
    """A format object's ``type`` when it is a string (a list or an object names no format)."""
    kind = value.get("type") if isinstance(value, Mapping) else None
    return kind if isinstance(kind, str) else None


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None
