"""A long chat stream is built event by event as it is written: the same events, no whole text."""

from __future__ import annotations

import orjson

from omniroute.tools.fakeupstream import wire


def _text(events: object) -> str:
    pieces = []
    for event in events:  # type: ignore[attr-defined]
        delta = orjson.loads(event.removeprefix(b"data: "))["choices"][0]["delta"]
        pieces.append(delta.get("content", ""))
    return "".join(pieces)


def test_a_stream_past_the_lazy_bound_has_the_events_an_eager_one_would_have() -> None:
    size = 1000
    n_chars = wire.LAZY_STREAM_CHARS + 10  # 1048583 characters after the 3 of the prefill
    answer = wire.Answer(n_chars, "alt", skip=3)  # a prefill's continuation
    text = wire.content(n_chars, "alt")[3:]

    events = wire.stream_events("m", answer, size, True)

    assert isinstance(events.content, wire.LazyEvents)
    assert len(events.content) == len(text) // size + 1
    assert _text(events.content) == text
    assert b'"role":"assistant"' in events.content[0] and b"role" not in events.content[1]
    assert len(_text(events.content[-1:])) == len(text) % size == 583
    assert _text(events.content[-2:]) == text[(len(events.content) - 2) * size :]
    usage = orjson.loads(events.tail[-1].removeprefix(b"data: "))["usage"]
    assert usage["completion_tokens"] == wire.tokens(n_chars - 3)


def test_a_short_stream_is_built_whole_and_cached() -> None:
    answer = wire.Answer(40)
    events = wire.stream_events("m", answer, 8, False)
    assert isinstance(events.content, tuple) and len(events.content) == 5
    assert _text(events.content) == wire.content(40)
    assert wire.stream_events("m", answer, 8, False) is events


def test_a_long_completion_is_the_same_json_around_its_text() -> None:
    answer = wire.Answer(wire.LAZY_STREAM_CHARS + 5, skip=2)

    before, after = wire.completion_around("m", answer)

    pieced = orjson.loads(before + answer.content.encode() + after)
    whole = orjson.loads(wire.completion_body("m", answer))
    pieced.pop("created"), whole.pop("created")  # the clock's second may turn in between
    assert pieced == whole
