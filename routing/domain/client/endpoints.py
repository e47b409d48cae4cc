"""Client APIs as declarations: one :class:`Endpoint` per API (pure).

A descriptor says everything the generic relay consumer needs to serve one client API: how
to parse and validate a request, which targets can serve it (by wire format; no translation
between formats), the upstream path, the client headers passed through (never one of
``NEVER_FORWARDED``), how the API writes an error body and reads a stream (its in-band error
event, its end marker, its tokens), the route clients call and its OpenAPI description. Adding a
client API is adding a descriptor here and to ``CLIENT_APIS``: ``omniroute.asgi`` routes every
one, and ``/api/schema/`` describes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from routing.domain.affinity.session_key import SESSION_HEADERS
from routing.domain.client import descriptions
from routing.domain.client.descriptions import ApiDescription
from routing.domain.client.errors import anthropic_error_body
from routing.domain.client.requests import (
    ClientRequest,
    parse_chat_request,
    parse_messages_request,
    parse_responses_request,
)
from routing.domain.config.vocabulary import WireFormat
from routing.domain.streams.chat import CHAT_SPLICING, ChatStream
from routing.domain.streams.messages import MESSAGES_SPLICING, MessagesStream
from routing.domain.streams.responses import ResponsesStream
from routing.domain.streams.state import Splicing, StreamState

NEVER_FORWARDED = frozenset(
    {
        *SESSION_HEADERS,
        b"authorization",
        b"x-api-key",
        b"x-omniroute-lease-owner",
        b"x-omniroute-lease-generation",
    }
)
"""Client headers no endpoint passes upstream: the three session-affinity
headers, the lease headers and the client's own credentials for the gateway."""


class Parser(Protocol):
    """Reads a client's body as its API does; a body nested past ``max_depth`` is a 400."""

    def __call__(self, body: bytes, max_depth: int = ...) -> ClientRequest: ...


def _as_is(status: int, body: bytes) -> bytes:
    return body


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One client API."""

    name: str  # as the decision header and logs say it
    route: str  # the path clients call, under /v1
    wire_format: str  # targets must speak it
    upstream_path: str  # appended to the connection's base URL
    parse: Parser
    stream_state: Callable[[], StreamState]
    # The stream state for a client that did not ask for the usage the gateway asked the
    # upstream for (``ClientRequest.hides_usage``): it removes the usage; only Chat Completions.
    hiding_usage: Callable[[], StreamState] | None = None
    render_error: Callable[[int, bytes], bytes] = _as_is  # from the OpenAI-style error body
    passed_headers: tuple[bytes, ...] = ()  # client request headers forwarded upstream
    pins_responses: bool = False  # answers have ids a later request may continue from
    splicing: Splicing | None = None  # how a stream cut after commit is continued, if it can be
    described: ApiDescription | None = None  # for the OpenAPI schema

    def __post_init__(self) -> None:
        refused = sorted(NEVER_FORWARDED.intersection(self.passed_headers))
        if refused:
            names = ", ".join(name.decode() for name in refused)
            raise ValueError(f"{self.name} may not pass {names} upstream")


CHAT_COMPLETIONS = Endpoint(
    "chat.completions",
    "/v1/chat/completions",
    WireFormat.OPENAI,
    "/chat/completions",
    parse_chat_request,
    ChatStream,
    hiding_usage=partial(ChatStream, hide_usage=True),
    splicing=CHAT_SPLICING,
    described=descriptions.CHAT_COMPLETIONS,
)

RESPONSES = Endpoint(
    "responses",
    "/v1/responses",
    WireFormat.OPENAI,
    "/responses",
    parse_responses_request,
    ResponsesStream,
    pins_responses=True,
    described=descriptions.RESPONSES,
)

MESSAGES = Endpoint(
    "messages",
    "/v1/messages",
    WireFormat.ANTHROPIC,
    "/messages",
    parse_messages_request,
    MessagesStream,
    render_error=anthropic_error_body,
    passed_headers=(b"anthropic-version", b"anthropic-beta"),
    splicing=MESSAGES_SPLICING,
    described=descriptions.MESSAGES,
)

CLIENT_APIS = (CHAT_COMPLETIONS, RESPONSES, MESSAGES)
"""Every client API the gateway serves, in the order the schema lists them."""
