"""Client APIs as declarations: one :class:`Endpoint` per API (pure).

A descriptor says everything the generic relay consumer needs to serve one client API: how
to parse and validate a request, which targets can serve it (by wire format; no translation
between formats), the upstream path, the client headers passed through (never one of
``NEVER_FORWARDED``), how the API writes an error body and reads a stream (its in-band error
event, its end marker, its tokens). Adding a client API is adding a descriptor here and a route
in ``omniroute.asgi``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from routing.domain.chat_stream import CHAT_SPLICING, ChatStream
from routing.domain.errors import anthropic_error_body
from routing.domain.messages_stream import MESSAGES_SPLICING, MessagesStream
from routing.domain.requests import (
    ClientRequest,
    parse_chat_request,
    parse_messages_request,
    parse_responses_request,
)
from routing.domain.responses_stream import ResponsesStream
from routing.domain.session_key import SESSION_HEADERS
from routing.domain.stream_state import Splicing, StreamState
from routing.domain.vocabulary import WireFormat

NEVER_FORWARDED = frozenset(
    {
        *SESSION_HEADERS, b"authorization", b"x-api-key", b"x-omniroute-lease-owner",
        b"x-omniroute-lease-generation",
    }
)  # fmt: skip
"""Client headers no endpoint passes upstream (spec decision 8): the three session-affinity
headers, the lease headers and the client's own credentials for the gateway."""


def _as_is(status: int, body: bytes) -> bytes:
    return body


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One client API."""

    name: str  # as the decision header and logs say it
    wire_format: str  # targets must speak it
    upstream_path: str  # appended to the connection's base URL
    parse: Callable[[bytes], ClientRequest]
    stream_state: Callable[[], StreamState]
    render_error: Callable[[int, bytes], bytes] = _as_is  # from the OpenAI-style error body
    passed_headers: tuple[bytes, ...] = ()  # client request headers forwarded upstream
    pins_responses: bool = False  # answers have ids a later request may continue from
    splicing: Splicing | None = None  # how a stream cut after commit is continued, if it can be

    def __post_init__(self) -> None:
        refused = sorted(NEVER_FORWARDED.intersection(self.passed_headers))
        if refused:
            names = ", ".join(name.decode() for name in refused)
            raise ValueError(f"{self.name} may not pass {names} upstream")


CHAT_COMPLETIONS = Endpoint(
    "chat.completions", WireFormat.OPENAI, "/chat/completions", parse_chat_request, ChatStream,
    splicing=CHAT_SPLICING,
)  # fmt: skip

RESPONSES = Endpoint(
    "responses", WireFormat.OPENAI, "/responses", parse_responses_request, ResponsesStream,
    pins_responses=True,
)  # fmt: skip

MESSAGES = Endpoint(
    "messages", WireFormat.ANTHROPIC, "/messages", parse_messages_request, MessagesStream,
    render_error=anthropic_error_body,
    passed_headers=(b"anthropic-version", b"anthropic-beta"),
    splicing=MESSAGES_SPLICING,
)  # fmt: skip
