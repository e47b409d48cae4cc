"""Server-sent events, split incrementally from the bytes an upstream sends (pure).

The relay needs whole events: to hold back what precedes the first token, to drop a malformed
event, to know what text reached the client. :class:`SseSplitter` cuts the byte stream at blank
lines (``\\n\\n``; ``\\r\\n`` line ends are normalised first) and parses each event's ``event:``
name and joined ``data:`` lines. An event's ``raw`` bytes are what the client is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE_DATA = b"[DONE]"
DONE_EVENT = b"data: [DONE]\n\n"
_BOUNDARY = b"\n\n"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its bytes as relayed, its name, and its data (``None`` without a data line:
    a comment such as ``: ping``, or a bare ``event:``)."""

    raw: bytes
    data: bytes | None = None
    name: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data == DONE_DATA


def parse_event(raw: bytes) -> SseEvent:
    """The fields of one event's bytes (terminated by its blank line or not)."""
    if raw.startswith(b"data: ") and raw.count(b"\n", 0, -2) == 0:  # the usual one-liner
        return SseEvent(raw, raw[6:].rstrip(b"\n"))
    data: list[bytes] = []
    name: str | None = None
    for line in raw.split(b"\n"):
        field, colon, value = line.partition(b":")
        if not colon or not field:  # a blank line, or a comment (":...")
            continue
        value = value[1:] if value.startswith(b" ") else value
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    return SseEvent(raw, b"\n".join(data) if data else None, name)


class SseSplitter:
    """Feeds on chunks as they arrive; hands out every event completed so far."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # a "\r\n" may straddle chunks: wait for its "\n"
                self._buffer = buffer
                return []
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[SseEvent] = []
        start = 0
        while (end := buffer.find(_BOUNDARY, start)) != -1:
            end += 2
            raw = buffer[start:end]
            if raw.strip(b"\n"):  # extra blank lines between events are not events
                events.append(parse_event(raw.lstrip(b"\n")))
            start = end
        self._buffer = buffer[start:] if start < len(buffer) else b""
        return events

    def rest(self) -> SseEvent | None:
        """What is left when the stream ends: an event without its closing blank line."""
        raw, self._buffer = self._buffer.strip(b"\n"), b""
        return parse_event(raw + _BOUNDARY) if raw else None
