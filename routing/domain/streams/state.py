"""What a client API's stream state must offer the relay (pure).

Each client API (Chat Completions, Responses, Messages) reads its upstream's server-sent events
through one state object per stream. The relay asks it only what it needs: what kind each event
is (held back before the first token, relayed after it, an in-band error, the end), whether the
answer finished, the text the client has, the tokens its usage reported, whether a continuation
could be stitched on after a cut, and how this API writes its own in-band error and its
end-of-stream marker.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Final, Protocol

import orjson

from omniroute.core.bounds import unwritable
from routing.domain.streams.sse import SseEvent


class Kind(Enum):
    """An event's role in the stream."""

    PREAMBLE = "preamble"  # a role-only or empty delta, a comment, a heartbeat, a block start
    TOKEN = "token"  # anything the client reads: text, reasoning, a tool call, a refusal
    USAGE = "usage"  # a usage block without content
    DONE = "done"  # the stream's own end (``data: [DONE]``, ``response.completed``, ...)
    MALFORMED = "malformed"  # data that is not a JSON object
    ERROR = "error"  # an in-band error from the upstream


# A continuation past this much text would send it back as a prefill no upstream takes (or wait
# for a regeneration to repeat it); and a stream must not hold its whole text in the gateway,
# however long it runs. About 256 k tokens: more than any model writes in one answer today.
RECOVERY_TEXT_MAX_CHARS: Final = 1024 * 1024


class SentText(list[str]):
    """The assistant text the client has been sent, in order, kept for recovery after a cut.

    Past :data:`RECOVERY_TEXT_MAX_CHARS` characters nothing more is kept and what was kept is
    dropped (``overflowed``): such a stream is not continued, so its memory stays bounded.
    """

    __slots__ = ("chars", "overflowed")

    def __init__(self) -> None:
        super().__init__()
        self.chars = 0
        self.overflowed = False

    def append(self, piece: str) -> None:
        if self.overflowed:
            return
        self.chars += len(piece)
        if self.chars > RECOVERY_TEXT_MAX_CHARS:
            self.clear()
            self.overflowed = True
        else:
            super().append(piece)


def json_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object an event's data holds; ``None`` when it holds anything else, or one
    nested deeper than the gateway can write again."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) and not unwritable(data, payload) else None


class StreamState(Protocol):
    """The state of one client's stream, as the relay and recovery read it."""

    text: SentText  # assistant text sent, in order (bounded)
    finished: bool  # the answer is complete (only usage and the end marker may follow)
    envelope: dict[str, Any] | None  # the first stream's identity (id, model, ...)
    tokens_in: int | None  # as the stream's usage reported them, once it did
    tokens_out: int | None

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
    """How a client API's stream is continued after a cut (``routing.proxy.recovery``)."""

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
