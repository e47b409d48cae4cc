"""Server-sent events, split incrementally from the bytes an upstream sends (pure).

The relay needs whole events: to hold back what precedes the first token, to drop a malformed
event, to know what text reached the client. :class:`SseSplitter` cuts the byte stream at blank
lines (``\\n\\n``; ``\\r\\n`` line ends are normalised first) and parses each event's ``event:``
name and joined ``data:`` lines. An event's ``raw`` bytes are what the client is sent.
"""

from __future__ import annotations

import re

DONE_DATA = b"[DONE]"
DONE_EVENT = b"data: [DONE]\n\n"
_BOUNDARY = b"\n\n"
_NEWLINE = 10
_EVENT_START = re.compile(rb"[^\n]")  # the first byte of an event: anything but a line end


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
    """Feeds on chunks as they arrive; hands out every event completed so far.

    The work is linear in the bytes fed, however many chunks an event arrives in: the pieces of
    an unfinished event are kept apart, only the new bytes are searched for its end, and they
    are joined once, when it is complete. With ``max_event_bytes``, an event growing past that
    many bytes stops the splitter (``overflowed``): nothing more is handed out, and the bytes
    it held are let go.
    """

    __slots__ = ("_carriage", "_limit", "_pending", "_size", "overflowed")

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._pending: list[bytes] = []  # an unfinished event's pieces (normalised, none empty)
        self._size = 0  # their bytes
        self._carriage = False  # the last chunk ended in "\r", maybe half of a "\r\n"
        self._limit = max_event_bytes
        self.overflowed = False

    @property
    def empty(self) -> bool:
        """Whether every byte fed so far belongs to an event handed out."""
        return not self._pending and not self._carriage and not self.overflowed

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self.overflowed:
            return []
        if not self._pending and not self._carriage and chunk.startswith(b"data: "):
            # Most chunks are one one-line event. A "\r" inside ends a line too: that chunk
            # takes the normalising path, as it would have had it come in two pieces.
            if (
                chunk.endswith(_BOUNDARY)
                and chunk.find(b"\n", 6) == len(chunk) - 2
                and b"\r" not in chunk
                and (self._limit is None or len(chunk) <= self._limit)
            ):
                return [SseEvent(chunk, chunk[6:-2])]
        if self._carriage:  # the "\r" held back ends a line, whether a "\n" follows or not
            self._carriage = False
            chunk = b"\n" + (chunk[1:] if chunk.startswith(b"\n") else chunk)
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                chunk, self._carriage = chunk[:-1], True
            chunk = _normalised(chunk)
        events: list[SseEvent] = []
        start = 0
        if self._pending:  # its end is in this chunk, or straddles the two
            straddles = self._pending[-1].endswith(b"\n") and chunk.startswith(b"\n")
            end = 1 if straddles else chunk.find(_BOUNDARY)
            if end == -1:
                return self._hold(chunk, events)
            start = end if straddles else end + 2
            if self._limit is not None and self._size + start > self._limit:
                return self._overflow(events)
            self._pending.append(chunk[:start])
            events.append(parse_event(b"".join(self._pending)))
            self._pending, self._size = [], 0
        size = len(chunk)
        while True:
            if start == size:
                return events
            if chunk[start] == _NEWLINE:  # blank lines are not events
                found = _EVENT_START.search(chunk, start)
                if found is None:
                    return events
                start = found.start()
            end = chunk.find(_BOUNDARY, start)
            if end == -1:
                return self._hold(chunk[start:] if start else chunk, events)
            if self._limit is not None and end + 2 - start > self._limit:
                return self._overflow(events)
            events.append(parse_event(chunk[start : end + 2]))
            start = end + 2

    def _hold(self, piece: bytes, events: list[SseEvent]) -> list[SseEvent]:
        """Keep ``piece`` of an unfinished event; hand out ``events``."""
        self._size += len(piece)
        if self._limit is not None and self._size > self._limit:
            return self._overflow(events)
        if piece:
            self._pending.append(piece)
        return events

    def _overflow(self, events: list[SseEvent]) -> list[SseEvent]:
        self.overflowed, self._pending, self._size = True, [], 0
        return events

    def rest(self) -> SseEvent | None:
        """What is left when the stream ends: an event without its closing blank line."""
        raw = b"".join(self._pending).strip(b"\n")
        self._pending, self._size, self._carriage = [], 0, False
        return parse_event(raw + _BOUNDARY) if raw else None


def _normalised(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data
