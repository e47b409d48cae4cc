"""What a client API's stream state must offer the relay (pure).

Each client API (Chat Completions, Responses, Messages) reads its upstream's server-sent events
through one state object per stream. The relay asks it only what it needs: what kind each event
is (held back before the first token, relayed after it, an in-band error, the end), whether the
answer finished, the text the client has, whether a continuation could be stitched on after a
cut, and how this API writes its own in-band error and its end-of-stream marker.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol

import orjson

from routing.domain.sse import SseEvent


class Kind(Enum):
    """An event's role in the stream."""

    PREAMBLE = "preamble"  # a role-only or empty delta, a comment, a heartbeat, a block start
    TOKEN = "token"  # anything the client reads: text, reasoning, a tool call, a refusal
    USAGE = "usage"  # a usage block without content
    DONE = "done"  # the stream's own end (``data: [DONE]``, ``response.completed``, ...)
    MALFORMED = "malformed"  # data that is not a JSON object
    ERROR = "error"  # an in-band error from the upstream


def json_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object an event's data holds; ``None`` when it holds anything else."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


class StreamState(Protocol):
    """The state of one client's stream, as the relay and recovery read it."""

    text: list[str]  # assistant text sent, in order
    finished: bool  # the answer is complete (only usage and the end marker may follow)
    envelope: dict[str, Any] | None  # the first stream's identity (id, model, ...)

    @property
    def continuable(self) -> bool:
        """Whether a continuation could be stitched on after a cut."""
        ...

    @property
    def end_event(self) -> bytes:
        """What ends the client's stream when the upstream forgot its own end marker."""
        ...

    def observe(self, event: SseEvent) -> tuple[Kind, dict[str, Any] | None]:
        """Classify ``event`` and record what it sends; its kind and parsed payload."""
        ...

    def error_event(self, message: str, code: str) -> bytes:
        """This API's in-band error event, ending a stream that broke after commit."""
        ...


class NotSpliceable(Exception):
    """A continuation carries what cannot be stitched into the client's stream (a tool call
    where the client has text)."""


class Splicing(Protocol):
    """How a client API's stream is continued after a cut (``routing.recovery``)."""

    def content_of(self, payload: dict[str, Any] | None) -> str:
        """The assistant text one event carries."""
        ...

    def continuation_event(
        self, payload: dict[str, Any], envelope: dict[str, Any] | None, *, skip: int = 0
    ) -> bytes | None:
        """A continuation's event as the client's stream carries it, its first ``skip``
        characters of text dropped; ``None`` when nothing of it is sent. May raise
        :class:`NotSpliceable`."""
        ...

    def with_prefill(self, payload: dict[str, Any], text: str) -> tuple[dict[str, Any], int]:
        """The request again, asking to continue ``text``; and how many leading whitespace
        characters of the continuation duplicate what the client has (a prefill may not end
        in whitespace)."""
        ...

    def finishes(self, payload: dict[str, Any]) -> bool:
        """Whether the event finishes the answer."""
        ...
