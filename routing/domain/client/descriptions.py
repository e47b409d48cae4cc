"""What each client API's OpenAPI description says: the request fields the gateway reads, the
answer's shape and the error shape (pure data).

Each :class:`~routing.domain.client.endpoints.Endpoint` carries one :class:`ApiDescription`;
``routing.api.openapi`` turns them into the ``/v1`` operations of ``/api/schema/``. The request
schemas state what the parsers in ``routing.domain.client.requests`` check, no more: every
other field passes through to the upstream untouched, so each body allows more properties.
The answers are sketched (the fields a client relies on), also open to more properties.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Schema = dict[str, Any]


class ErrorShape(StrEnum):
    """The envelope an API's error answers take (docs/architecture.md, "One request")."""

    OPENAI = "OpenAIError"  # {"error": {"message", "type", "code"}}
    ANTHROPIC = "AnthropicError"  # {"type": "error", "error": {"type", "message", "code"}}
    RESPONSES = "ResponsesError"  # {"error": {"message", "type", "code", "param"}}


@dataclass(frozen=True, slots=True)
class ApiDescription:
    """One client API, for a reader of the schema."""

    summary: str
    description: str
    request: Schema  # the body: the fields the gateway reads
    answer: Schema  # a plain (non-streaming) answer
    error_shape: ErrorShape = ErrorShape.OPENAI


_MODEL: Schema = {
    "type": "string",
    "minLength": 1,
    "pattern": r"\S",
    "description": "A combo's name or `provider/model`; must be one the client key may use.",
}
_STREAM: Schema = {
    "type": "boolean",
    "nullable": True,
    "description": "Answer as server-sent events (`text/event-stream`).",
}
_TOOLS: Schema = {
    "type": "array",
    "nullable": True,
    "items": {},
    "description": "Tool definitions; only targets whose catalog entry allows as many are tried.",
}
_MESSAGES: Schema = {
    "type": "array",
    "minItems": 1,
    "items": {"type": "object", "additionalProperties": True},
    "description": "The conversation, passed through as given.",
}
_USAGE: Schema = {"type": "object", "additionalProperties": True}


MAX_TOKENS_DESCRIBED = 2**31 - 1  # far above any model's output limit


def _body(properties: Schema, required: list[str], any_of: list[Schema] | None = None) -> Schema:
    body: Schema = {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": True,
    }
    if any_of:
        body["anyOf"] = any_of
    return body


CHAT_COMPLETIONS = ApiDescription(
    summary="Create a chat completion (OpenAI Chat Completions)",
    description=(
        "The OpenAI Chat Completions API. The gateway reads `model`, `messages`, `stream`, "
        "`tools`, `max_tokens` (or `max_completion_tokens`) and `response_format` to choose "
        "a target that speaks the OpenAI wire format; the body is passed through. A stream "
        "cut after its first token is continued on another target where the combo allows it."
    ),
    request=_body(
        {
            "model": _MODEL,
            "messages": _MESSAGES,
            "stream": _STREAM,
            "tools": _TOOLS,
            "max_tokens": {
                "type": "integer",
                "nullable": True,
                "description": "Room the answer needs: targets with a smaller output limit "
                "are skipped.",
            },
            "max_completion_tokens": {
                "type": "integer",
                "nullable": True,
                "description": "As `max_tokens`, and read first.",
            },
            "response_format": {
                "type": "object",
                "nullable": True,
                "additionalProperties": True,
                "description": "Structured output: only targets that support it are tried.",
            },
        },
        ["model", "messages"],
    ),
    answer={
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "example": "chat.completion"},
            "model": {"type": "string"},
            "choices": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            "usage": _USAGE,
            "warnings": {"type": "array", "items": {"type": "string"}},
        },
    },
)

RESPONSES = ApiDescription(
    summary="Create a model response (OpenAI Responses)",
    description=(
        "The OpenAI Responses API. The gateway reads `model`, `input` (or "
        "`previous_response_id`, or a stored `prompt`), `stream`, `tools`, "
        "`max_output_tokens` and `background`. A response continued with "
        "`previous_response_id` goes to the connection that produced the first one. "
        "`background: true` is served synchronously, with a warning in `warnings` and "
        "`X-OmniRoute-Warning`."
    ),
    request=_body(
        {
            "model": _MODEL,
            "input": {
                "oneOf": [{"type": "string"}, {"type": "array", "items": {}}],
                "description": "Required unless `previous_response_id` or `prompt` is given.",
            },
            "previous_response_id": {"type": "string", "minLength": 1},
            "prompt": {
                "type": "object",
                "additionalProperties": True,
                "description": "A stored prompt, passed through.",
            },
            "stream": _STREAM,
            "tools": _TOOLS,
            "max_output_tokens": {"type": "integer", "nullable": True},
            "background": {"type": "boolean", "nullable": True},
        },
        ["model"],
        # One of them says what to answer.
        any_of=[{"required": [name]} for name in ("input", "previous_response_id", "prompt")],
    ),
    answer={
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "example": "response"},
            "status": {"type": "string"},
            "model": {"type": "string"},
            "output": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            "usage": _USAGE,
            "warnings": {"type": "array", "items": {"type": "string"}},
        },
    },
    error_shape=ErrorShape.RESPONSES,
)

MESSAGES = ApiDescription(
    summary="Create a message (Anthropic Messages)",
    description=(
        "The Anthropic Messages API, served only by targets that speak Anthropic's wire "
        "format. The gateway reads `model`, `messages`, `stream`, `tools` and `max_tokens`; "
        "`anthropic-version` and `anthropic-beta` are passed upstream. Errors take "
        "Anthropic's envelope, with the gateway's code in `error.code`."
    ),
    request=_body(
        {
            "model": _MODEL,
            "messages": _MESSAGES,
            "stream": _STREAM,
            "tools": _TOOLS,
            # Bounded as the parser reads it: a JSON integer past 64 bits is not an integer.
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOKENS_DESCRIBED,
                "nullable": True,
            },
            "system": {"description": "The system prompt, passed through."},
        },
        ["model", "messages"],
    ),
    answer={
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string", "example": "message"},
            "role": {"type": "string", "example": "assistant"},
            "model": {"type": "string"},
            "content": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            "stop_reason": {"type": "string", "nullable": True},
            "usage": _USAGE,
        },
    },
    error_shape=ErrorShape.ANTHROPIC,
)

_ERROR_FIELDS: Schema = {
    "message": {"type": "string"},
    "type": {"type": "string", "nullable": True},
    "code": {"type": "string", "nullable": True, "description": "The gateway's own code."},
}
ERROR_SCHEMAS: dict[ErrorShape, Schema] = {
    ErrorShape.OPENAI: {
        "type": "object",
        "description": "An OpenAI-style error. The gateway's refusals may add `diagnostics` "
        "and `recovery_hint` beside `error`.",
        "required": ["error"],
        "additionalProperties": True,
        "properties": {
            "error": {
                "type": "object",
                "required": ["message"],
                "additionalProperties": True,
                "properties": _ERROR_FIELDS,
            }
        },
    },
    ErrorShape.RESPONSES: {
        "type": "object",
        "description": "The Responses API's error: OpenAI's envelope with `param`. Inside a "
        "stream whose head went out, an `error` event instead.",
        "required": ["error"],
        "additionalProperties": True,
        "properties": {
            "error": {
                "type": "object",
                "required": ["message"],
                "additionalProperties": True,
                "properties": {**_ERROR_FIELDS, "param": {"type": "string", "nullable": True}},
            }
        },
    },
    ErrorShape.ANTHROPIC: {
        "type": "object",
        "description": "Anthropic's error envelope; `error.code` is the gateway's own code.",
        "required": ["type", "error"],
        "additionalProperties": True,
        "properties": {
            "type": {"type": "string", "enum": ["error"]},
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "additionalProperties": True,
                "properties": _ERROR_FIELDS,
            },
        },
    },
}

MODEL_LIST: Schema = {
    "type": "object",
    "description": "OpenAI's `{object: list, data}`; with `anthropic-version`, Anthropic's "
    "`{data, has_more, first_id, last_id}`.",
    "required": ["data"],
    "additionalProperties": True,
    "properties": {
        "object": {"type": "string", "example": "list"},
        "data": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        "has_more": {"type": "boolean"},
        "first_id": {"type": "string", "nullable": True},
        "last_id": {"type": "string", "nullable": True},
    },
}
MODEL: Schema = {
    "type": "object",
    "description": "OpenAI's `{id, object: model, created, owned_by}`; with "
    "`anthropic-version`, Anthropic's `{type: model, id, display_name, created_at}`.",
    "required": ["id"],
    "additionalProperties": True,
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string"},
        "type": {"type": "string"},
        "created": {"type": "integer"},
        "owned_by": {"type": "string"},
        "display_name": {"type": "string"},
        "created_at": {"type": "string"},
    },
}
