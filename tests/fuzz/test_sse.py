"""The SSE splitter on arbitrary byte streams: never an exception, and the events do not depend
on how the stream was cut into chunks."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing.domain.streams.sse import SseEvent, SseSplitter, parse_event
from tests.fuzz.conftest import counted

pytestmark = pytest.mark.fuzz

_PIECES = (
    b"data: ",
    b"data:",
    b"event: ",
    b"id: 7",
    b": ping",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\r",
    b"[DONE]",
    b'{"choices":[{"delta":{"content":"hi"}}]}',
    b"x",
    b" ",
    b"\xff\xfe",
)
_SOUP = st.lists(st.sampled_from(_PIECES), max_size=40).map(b"".join)
# Mostly well-formed one-line events, whose payload may hold any of the pieces.
_EVENTS = st.lists(
    st.lists(st.sampled_from(_PIECES), max_size=4).map(lambda p: b"data: " + b"".join(p) + b"\n\n"),
    max_size=6,
).map(b"".join)
STREAM = st.one_of(_SOUP, _EVENTS, st.binary(max_size=300))

Seen = tuple[bytes, bytes | None, str | None]


def seen(events: list[SseEvent]) -> list[Seen]:
    return [(event.raw, event.data, event.name) for event in events]


def split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(stream) + 1) for cut in cuts})
    bounds = [0, *points, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def run(chunks: list[bytes], separator: bytes = b"") -> tuple[list[Seen], Seen | None]:
    """Feed ``chunks`` (each followed by ``separator`` but the last), then end the stream."""
    splitter = SseSplitter()
    events: list[SseEvent] = []
    for i, chunk in enumerate(chunks):
        events += splitter.feed(chunk + (separator if i < len(chunks) - 1 else b""))
    rest = splitter.rest()
    assert splitter.empty
    return seen(events), (seen([rest])[0] if rest is not None else None)


@given(STREAM, st.lists(st.integers(min_value=0), max_size=12))
@counted
def test_chunking(stream: bytes, cuts: list[int]) -> None:
    whole = run([stream])
    pieces = run(split(stream, cuts))
    byte_by_byte = run([stream[i : i + 1] for i in range(len(stream))])
    event_by_event = run(stream.split(b"\n\n"), separator=b"\n\n")  # how upstreams send

    assert pieces == whole
    assert byte_by_byte == whole
    assert event_by_event == whole
    events, rest = whole
    for raw, data, _ in [*events, *([rest] if rest else [])]:
        assert raw.endswith(b"\n\n") and raw.strip(b"\n")
        assert b"\r" not in raw  # line ends are normalised before an event is cut
        assert data is None or isinstance(data, bytes)


_FIELD_TEXT = st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(alphabet="abcxyz_-", min_size=1, max_size=8)),
            st.lists(_FIELD_TEXT, min_size=1, max_size=3),
        ),
        max_size=5,
    ),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
@counted
def test_round_trip(events: list[tuple[str | None, list[bytes]]], newline: bytes) -> None:
    wire = b""
    for name, lines in events:
        head = [b"event: " + name.encode()] if name else []
        body = head + [b"data: " + line for line in lines]
        wire += newline.join(body) + newline + newline
    parsed, rest = run([wire])
    if rest is not None:  # with bare "\r" line ends, the last "\r" waits for a possible "\n"
        assert newline == b"\r"
        parsed.append(rest)

    assert [(data, name) for _, data, name in parsed] == [
        (b"\n".join(lines), name) for name, lines in events
    ]


@given(st.binary(max_size=200))
@counted
def test_parse_event(raw: bytes) -> None:
    event = parse_event(raw)

    assert event.raw == raw
    assert event.data is None or isinstance(event.data, bytes)
    assert event.name is None or isinstance(event.name, str)
