"""Parsing and validating a client's request, per client API (pure).

Each parser returns a :class:`ClientRequest`, or raises a 400 ``GatewayError`` naming what is
wrong; the endpoint renders it in its own error shape. Fields the gateway does not read are
passed through to the upstream untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from omniroute.core.bounds import DEFAULT_MAX_JSON_DEPTH, read_nesting_exceeds
from routing.domain.client.errors import GatewayError
from routing.domain.plan.needs import (
    NO_NEEDS,
    RequestNeeds,
    chat_needs,
    messages_needs,
    responses_needs,
)

BACKGROUND_WARNING = (
    "background mode is not supported by this gateway: the response was produced synchronously"
)


@dataclass(slots=True)
class ClientRequest:
    """What the gateway reads of a client's request; ``payload`` is the whole body."""

    payload: dict[str, Any]
    model: str
    stream: bool
    tools: int = 0  # how many tools the request declares
    previous_response_id: str | None = None
    warnings: tuple[str, ...] = field(default=())
    # How the client API reads what the request needs of a model (tools, structured output,
    # room) from its payload: asked only when a combo's targets are checked against them
    # (``routing.domain.plan.planning``), then kept in ``read_needs``.
    needs_of: Callable[[Mapping[str, Any]], RequestNeeds] | None = None
    read_needs: RequestNeeds | None = None
    # The gateway asked the upstream for a usage block the client did not ask for: it is
    # removed from what the client is sent (``ask_for_usage``).
    hides_usage: bool = False

    @property
    def needs(self) -> RequestNeeds:
        """What the request needs of a model, read from its payload the first time it is asked
        (a single model's request never is: its upstream is the judge)."""
        return self.needs_now()

    def needs_now(self) -> RequestNeeds:
        """:attr:`needs`, as a function planning calls only when it checks a combo's targets."""
        if self.read_needs is None:
            self.read_needs = NO_NEEDS if self.needs_of is None else self.needs_of(self.payload)
        return self.read_needs


def _invalid(code: str, message: str) -> GatewayError:
    return GatewayError(400, code, message)


def json_object(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> dict[str, Any]:
    """The body as a JSON object nested at most ``max_depth`` levels deep, or a 400 (a deeper
    body could not even be written back out, to the upstream or in an error)."""
    if not body:
        raise _invalid("invalid_json", "The request body is empty; expected a JSON object.")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _invalid("invalid_json", f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise _invalid("invalid_json", "The request body must be a JSON object.")
    if read_nesting_exceeds(body, payload, max_depth):
        raise _invalid("json_too_deep", f"The request body nests deeper than {max_depth} levels.")
    return payload


def _common(payload: dict[str, Any]) -> ClientRequest:
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("missing_model", "The 'model' field is required and must be a string.")
    stream = payload.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _invalid("invalid_stream", "The 'stream' field must be a boolean.")
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("invalid_tools", "The 'tools' field must be an array.")
    return ClientRequest(payload, model, stream, len(tools) if tools else 0)


def _messages(payload: dict[str, Any]) -> None:
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("missing_messages", "The 'messages' field is required: a non-empty array.")


def parse_chat_request(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> ClientRequest:
    """``POST /v1/chat/completions``: ``model``, ``messages`` and an optional ``stream``."""
    payload = json_object(body, max_depth)
    request = _common(payload)
    _messages(payload)
    request.needs_of = chat_needs
    if request.stream:
        ask_for_usage(request)
    return request


def ask_for_usage(request: ClientRequest) -> None:
    """A streamed chat request asks its upstream for the usage block
    (``stream_options.include_usage``), the client's other stream options kept, so that every
    stream reports its tokens; when the client did not ask for usage itself, it is hidden from
    it (``hides_usage``). Stream options that are not an object are left for the upstream to
    refuse."""
    options = request.payload.get("stream_options")
    if options is None:
        options = {}
    if not isinstance(options, dict) or options.get("include_usage") is True:
        return
    usage = {**options, "include_usage": True}
    request.payload = {**request.payload, "stream_options": usage}
    request.hides_usage = True


USAGE_REFUSED_STATUSES = frozenset({400, 422})


def refuses_usage_request(status: int | None, body: bytes) -> bool:
    """Whether an upstream's answer refuses the ``stream_options`` the gateway added (an
    OpenAI-compatible server that knows no such parameter: 400 or 422 naming it)."""
    return status in USAGE_REFUSED_STATUSES and b"stream_options" in body


def without_usage_request(payload: dict[str, object]) -> dict[str, object]:
    """``payload`` without the ``stream_options`` the gateway added (``ask_for_usage``)."""
    return {name: value for name, value in payload.items() if name != "stream_options"}


def parse_responses_request(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> ClientRequest:
    """``POST /v1/responses``: ``model`` and ``input`` (or a ``previous_response_id`` or a
    stored ``prompt``). ``background: true`` is served synchronously, with a warning."""
    payload = json_object(body, max_depth)
    request = _common(payload)
    previous = payload.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise _invalid(
            "invalid_previous_response_id", "The 'previous_response_id' field must be a string."
        )
    given = payload.get("input")
    if given is None and previous is None and payload.get("prompt") is None:
        raise _invalid("missing_input", "The 'input' field is required: a string or an array.")
    if given is not None and not isinstance(given, str | list):
        raise _invalid("invalid_input", "The 'input' field must be a string or an array.")
    request.previous_response_id = previous
    request.needs_of = responses_needs
    background = payload.get("background")
    if background is not None and not isinstance(background, bool):
        raise _invalid("invalid_background", "The 'background' field must be a boolean.")
    if background:
        request.payload = {k: v for k, v in payload.items() if k != "background"}
        request.warnings = (BACKGROUND_WARNING,)
    return request


def parse_messages_request(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> ClientRequest:
    """``POST /v1/messages``: ``model``, ``messages``, an optional ``stream``; ``max_tokens``
    (which Anthropic requires) must be a positive integer when given."""
    payload = json_object(body, max_depth)
    request = _common(payload)
    _messages(payload)
    max_tokens = payload.get("max_tokens")
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        raise _invalid("invalid_max_tokens", "The 'max_tokens' field must be a positive integer.")
    request.needs_of = messages_needs
    return request
