"""Splitting upstream bytes into server-sent events."""

from __future__ import annotations

import time

import pytest

from routing.domain.streams.sse import SseEvent, SseSplitter, parse_event

MIB = 1024 * 1024


def split(*chunks: bytes) -> tuple[list[SseEvent], SseEvent | None]:
    splitter = SseSplitter()
    events = [event for chunk in chunks for event in splitter.feed(chunk)]
    return events, splitter.rest()


def test_one_liners_are_split_at_blank_lines_and_keep_their_bytes() -> None:
    events, rest = split(b'data: {"a": 1}\n\ndata: [DONE]\n\n')
    assert [e.raw for e in events] == [b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]
    assert [e.data for e in events] == [b'{"a": 1}', b"[DONE]"]
    assert [e.is_done for e in events] == [False, True]
    assert rest is None


def test_an_event_cut_across_chunks_is_handed_out_once_whole() -> None:
    events, rest = split(b'data: {"a"', b": 1}\n", b"\ndata: x\n\n")
    assert [e.data for e in events] == [b'{"a": 1}', b"x"]
    assert rest is None


def test_crlf_line_ends_are_normalised_even_when_split_between_chunks() -> None:
    events, _ = split(b"data: one\r\n\r", b"\ndata: two\r\n\r\n")
    assert [e.data for e in events] == [b"one", b"two"]
    assert events[0].raw == b"data: one\n\n"


def test_named_events_multiline_data_and_comments() -> None:
    events, _ = split(b"event: message_start\ndata: {\ndata: }\n\n: ping\n\n")
    assert events[0].name == "message_start"
    assert events[0].data == b"{\n}"
    assert events[1].data is None and events[1].raw == b": ping\n\n"


def test_extra_blank_lines_between_events_are_not_events() -> None:
    events, _ = split(b"data: a\n\n\n\ndata: b\n\n")
    assert [e.data for e in events] == [b"a", b"b"]


def test_what_is_left_at_the_end_is_one_event_without_its_blank_line() -> None:
    events, rest = split(b"data: a\n\ndata: tail")
    assert [e.data for e in events] == [b"a"]
    assert rest is not None and rest.data == b"tail" and rest.raw == b"data: tail\n\n"


@pytest.mark.parametrize(
    ("raw", "data", "name"),
    [
        (b"data:no-space\n\n", b"no-space", None),
        (b"id: 7\ndata: x\n\n", b"x", None),
        (b"event: ping\n\n", None, "ping"),
        (b"data: a\ndata: b\n\n", b"a\nb", None),
    ],
)
def test_parse_event_fields(raw: bytes, data: bytes | None, name: str | None) -> None:
    event = parse_event(raw)
    assert (event.data, event.name) == (data, name)


def test_bare_carriage_returns_end_lines_too() -> None:
    events, rest = split(b"data: one\r\r", b"data: two\r\r", b"data: three\r\r")
    assert [e.data for e in events] == [b"one", b"two"]
    assert rest is not None and rest.data == b"three"  # its last "\r" could have been a "\r\n"


def test_a_bare_carriage_return_inside_a_whole_one_line_chunk_ends_its_line() -> None:
    # The one-chunk shortcut once kept "a\rb" as the data; cut in two, the same bytes gave "a"
    whole, _ = split(b"data: a\rb\n\n")
    cut, _ = split(b"data: a\r", b"b\n\n")

    assert [(e.raw, e.data) for e in whole] == [(b"data: a\nb\n\n", b"a")]
    assert [(e.raw, e.data) for e in cut] == [(b"data: a\nb\n\n", b"a")]


def test_a_leading_newline_is_not_part_of_the_next_event() -> None:
    events, _ = split(b"data: a\n\n\ndata: b\n\n")
    assert [e.raw for e in events] == [b"data: a\n\n", b"data: b\n\n"]


def test_empty_tells_whether_bytes_are_held() -> None:
    splitter = SseSplitter()
    splitter.feed(b"data: a\n\ndata: b")
    assert not splitter.empty
    splitter.feed(b"\n\n")
    assert splitter.empty


# --- one event's size -------------------------------------------------------------------------


def test_an_event_growing_past_the_limit_stops_the_splitter_after_the_events_before_it() -> None:
    splitter = SseSplitter(max_event_bytes=64)

    events = splitter.feed(b"data: a\n\ndata: " + b"x" * 40)
    more = splitter.feed(b"x" * 40)

    assert [e.data for e in events] == [b"a"] and more == []
    assert splitter.overflowed and not splitter.empty
    assert splitter.feed(b"\n\ndata: b\n\n") == [] and splitter.rest() is None


@pytest.mark.parametrize(
    "chunk",
    [b"data: " + b"x" * 100 + b"\n\n", b"data: a\n\ndata: " + b"x" * 100 + b"\n\ndata: b\n\n"],
    ids=["one-liner", "among-others"],
)
def test_an_event_over_the_limit_in_one_chunk_overflows_too(chunk: bytes) -> None:
    splitter = SseSplitter(max_event_bytes=64)

    events = splitter.feed(chunk)

    assert b"x" not in b"".join(e.raw for e in events) and splitter.overflowed


def test_an_event_of_exactly_the_limit_is_handed_out() -> None:
    raw = b"data: " + b"x" * 56 + b"\n\n"  # 64 bytes
    events, rest = split_with(64, raw[:30], raw[30:])
    assert [e.raw for e in events] == [raw] and rest is None


def split_with(limit: int, *chunks: bytes) -> tuple[list[SseEvent], SseEvent | None]:
    splitter = SseSplitter(max_event_bytes=limit)
    events = [event for chunk in chunks for event in splitter.feed(chunk)]
    assert not splitter.overflowed
    return events, splitter.rest()


def event_chunks(size: int, piece: int = 64 * 1024) -> list[bytes]:
    """One event of about ``size`` bytes, cut into ``piece``-byte chunks as a socket hands
    them over."""
    raw = b'data: {"padding": "' + b"x" * size + b'"}\n\n'
    return [raw[at : at + piece] for at in range(0, len(raw), piece)]


def split_seconds(chunks: list[bytes]) -> float:
    splitter = SseSplitter()
    started = time.perf_counter()
    events = [event for chunk in chunks for event in splitter.feed(chunk)]
    seconds = time.perf_counter() - started
    assert len(events) == 1 and len(events[0].raw) == sum(map(len, chunks))
    return seconds


def test_splitting_is_linear_in_the_bytes_of_one_event() -> None:
    # The best of a few interleaved runs per size (a busy machine slows some of them), and a
    # few such trials: memory effects of this size (page faults, caches) can double one run,
    # but a splitter that copies its buffer on every chunk needs four times as long for twice
    # the bytes in every trial.
    small, large = event_chunks(24 * MIB), event_chunks(48 * MIB)
    ratios = []
    for _ in range(3):
        times: dict[int, list[float]] = {id(small): [], id(large): []}
        spent = time.perf_counter()
        while len(times[id(large)]) < 5 and time.perf_counter() - spent < 2:
            for chunks in (small, large):
                times[id(chunks)].append(split_seconds(chunks))
        ratios.append(min(times[id(large)]) / min(times[id(small)]))
        if ratios[-1] <= 2.5:
            return
    raise AssertionError(f"48 MiB took {ratios} times as long as 24 MiB to split")
