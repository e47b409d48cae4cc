"""Parsing and validating a client's chat request, and encoding it for one target."""

from __future__ import annotations

from typing import Any

import orjson

from routing.domain.errors import GatewayError
from routing.domain.planning import Target


def _invalid(code: str, message: str) -> GatewayError:
    return GatewayError(400, code, message)


def parse_chat_request(body: bytes) -> dict[str, Any]:
    """The request as a dict, or a 400 naming what is wrong."""
    if not body:
        raise _invalid("invalid_json", "The request body is empty; expected a JSON object.")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _invalid("invalid_json", f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise _invalid("invalid_json", "The request body must be a JSON object.")
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("missing_model", "The 'model' field is required and must be a string.")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("missing_messages", "The 'messages' field is required: a non-empty array.")
    if not isinstance(payload.get("stream", False), bool):
        raise _invalid("invalid_stream", "The 'stream' field must be a boolean.")
    return payload


def encode_for_target(payload: dict[str, Any], target: Target) -> bytes:
    """The body sent upstream: the client's, with the model the target expects."""
    return orjson.dumps({**payload, "model": target.model})
