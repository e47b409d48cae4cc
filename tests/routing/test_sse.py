"""Splitting upstream bytes into server-sent events."""

from __future__ import annotations

import pytest

from routing.domain.sse import SseEvent, SseSplitter, parse_event


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
