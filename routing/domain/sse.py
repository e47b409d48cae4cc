"""Server-sent events, split incrementally from the bytes an upstream sends (pure).

The relay needs whole events: to hold back what precedes the first token, to drop a malformed
event, to know what text reached the client. :class:`SseSplitter` cuts the byte stream at blank
lines (``\\n\\n``; ``\\r\\n`` line ends are normalised first) and parses each event's ``event:``
name and joined ``data:`` lines. An event's ``raw`` bytes are what the client is sent.
"""

from __future__ import annotations

DONE_DATA = b"[DONE]"
DONE_EVENT = b"data: [DONE]\n\n"
_BOUNDARY = b"\n\n"
_NEWLINE = 10


class SseEvent:
    """One event: its bytes as relayed, its name, and its data (``None`` without a data line:
    a comment such as ``: ping``, or a bare ``event:``). A plain slotted class: one is made
    per relayed event."""

    __slots__ = ("data", "name", "raw")

    def __init__(self, raw: bytes, data: bytes | None = None, name: str | None = None) -> None:
        self.raw, self.data, self.name = raw, data, name

    def __repr__(self) -> str:
        return f"SseEvent({self.raw!r})"

    @property
    def is_done(self) -> bool:
        return self.data == DONE_DATA


def parse_event(raw: bytes) -> SseEvent:
    """The fields of one event's bytes (terminated by its blank line or not)."""
    if raw.startswith(b"data: ") and raw.endswith(_BOUNDARY) and raw.find(b"\n", 6) == len(raw) - 2:
        return SseEvent(raw, raw[6:-2])  # the usual one-liner
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

    @property
    def empty(self) -> bool:
        """Whether every byte fed so far belongs to an event handed out."""
        return not self._buffer

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not self._buffer and chunk.startswith(b"data: ") and chunk.endswith(_BOUNDARY):
            # Most chunks are one one-line event. A "\r" inside ends a line too: that chunk
            # takes the normalising path, as it would have had it come in two pieces.
            if chunk.find(b"\n", 6) == len(chunk) - 2 and b"\r" not in chunk:
                return [SseEvent(chunk, chunk[6:-2])]
        buffer = self._buffer + chunk if self._buffer else chunk
        held = b""
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # a "\r\n" may straddle chunks: hold the "\r"
                buffer, held = buffer[:-1], b"\r"
            buffer = _normalised(buffer)
        events: list[SseEvent] = []
        start, size = 0, len(buffer)
        while True:
            while start < size and buffer[start] == _NEWLINE:  # blank lines are not events
                start += 1
            end = buffer.find(_BOUNDARY, start)
            if end == -1:
                break
            events.append(parse_event(buffer[start : end + 2]))
            start = end + 2
        self._buffer = (buffer[start:] if start < len(buffer) else b"") + held
        return events

    def rest(self) -> SseEvent | None:
        """What is left when the stream ends: an event without its closing blank line."""
        raw, self._buffer = _normalised(self._buffer).strip(b"\n"), b""
        return parse_event(raw + _BOUNDARY) if raw else None


def _normalised(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data
