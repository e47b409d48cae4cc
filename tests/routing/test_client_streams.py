"""The Responses and Messages stream states and the Messages continuation (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.domain.streams.messages import MESSAGE_STOP, MESSAGES_SPLICING, MessagesStream
from routing.domain.streams.responses import ResponsesStream
from routing.domain.streams.sse import SseEvent, parse_event
from routing.domain.streams.state import Kind, NotSpliceable


def sse(name: str, payload: dict[str, Any]) -> SseEvent:
    return parse_event(f"event: {name}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n")


def message_events(*texts: str) -> list[SseEvent]:
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "content": []}}
    events = [sse("message_start", start)]
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    events.append(sse("content_block_start", block))
    events.append(sse("ping", {"type": "ping"}))
    for text in texts:
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }
        events.append(sse("content_block_delta", delta))
    return events


def finish_events() -> list[SseEvent]:
    return [
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        sse("message_stop", {"type": "message_stop"}),
    ]


# --- Messages ------------------------------------------------------------------------------


def test_a_messages_stream_is_read_event_by_event() -> None:
    stream = MessagesStream()

    kinds = [stream.observe(e)[0] for e in [*message_events("Hel", "lo"), *finish_events()]]

    assert kinds == [
        Kind.PREAMBLE,
        Kind.PREAMBLE,
        Kind.PREAMBLE,
        Kind.TOKEN,
        Kind.TOKEN,
        Kind.PREAMBLE,
        Kind.USAGE,
        Kind.DONE,
    ]
    assert stream.text == ["Hel", "lo"] and stream.finished
    assert stream.envelope == {"id": "msg_1", "model": "claude"}
    assert stream.continuable


def test_the_stop_reason_finishes_the_answer_before_message_stop() -> None:
    stream = MessagesStream()
    for event in [*message_events("a"), *finish_events()[:2]]:
        stream.observe(event)

    assert stream.finished


@pytest.mark.parametrize(
    "event",
    [
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "name": "f"},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hm"},
            },
        ),
    ],
)
def test_a_tool_call_or_thinking_makes_the_answer_not_continuable(event: SseEvent) -> None:
    stream = MessagesStream()

    kind, _ = stream.observe(event)

    assert kind is Kind.TOKEN and not stream.continuable


def test_an_error_event_and_a_malformed_one() -> None:
    stream = MessagesStream()
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}

    assert stream.observe(sse("error", error))[0] is Kind.ERROR
    assert stream.observe(SseEvent(b"", b"{nope"))[0] is Kind.MALFORMED


def test_the_messages_error_event_is_anthropic_shaped() -> None:
    raw = MessagesStream().error_event("it broke", "upstream_stream_interrupted")

    event = parse_event(raw)
    assert event.name == "error"
    assert orjson.loads(event.data or b"") == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "it broke",
            "code": "upstream_stream_interrupted",
        },
    }


def test_a_continuation_goes_into_the_client_s_open_text_block() -> None:
    def sent(event: SseEvent, skip: int = 0) -> bytes | None:
        return MESSAGES_SPLICING.continuation_event(
            orjson.loads(event.data or b""), None, skip=skip
        )

    start, block, ping, delta = message_events("world")
    stop, message_delta, message_stop = finish_events()

    assert [sent(e) for e in (start, block, ping, stop)] == [None, None, None, None]
    moved = parse_event(sent(delta, skip=2) or b"")
    assert orjson.loads(moved.data or b"")["delta"] == {"type": "text_delta", "text": "rld"}
    closing = sent(message_delta) or b""
    assert closing.startswith(b"event: content_block_stop\n") and b"end_turn" in closing
    assert sent(message_stop) == MESSAGE_STOP


def test_a_continuation_that_calls_a_tool_cannot_be_spliced() -> None:
    tool = {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use"}}

    with pytest.raises(NotSpliceable):
        MESSAGES_SPLICING.continuation_event(tool, None)


def test_the_prefill_leaves_trailing_whitespace_to_the_continuation() -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "x"}]}

    prefilled, trim = MESSAGES_SPLICING.with_prefill(payload, "Hello  ")

    assert prefilled["messages"][-1] == {"role": "assistant", "content": "Hello"}
    assert trim == 2
    assert payload["messages"] == [{"role": "user", "content": "x"}]


# --- Responses ------------------------------------------------------------------------------


def response_event(kind: str, sequence: int, **fields: Any) -> SseEvent:
    return sse(kind, {"type": kind, "sequence_number": sequence, **fields})


def test_a_responses_stream_is_read_event_by_event() -> None:
    stream = ResponsesStream()
    events = [
        response_event("response.created", 0, response={"id": "resp_1", "model": "m"}),
        response_event("response.output_item.added", 1),
        response_event("response.output_text.delta", 2, delta="Hel"),
        response_event("response.function_call_arguments.delta", 3, delta="{}"),
        response_event("response.output_text.done", 4),
        response_event("response.completed", 5),
    ]

    kinds = [stream.observe(e)[0] for e in events]

    assert kinds == [Kind.PREAMBLE, Kind.PREAMBLE, Kind.TOKEN, Kind.TOKEN, Kind.PREAMBLE, Kind.DONE]
    assert stream.text == ["Hel"] and stream.finished
    assert stream.envelope == {"id": "resp_1", "model": "m"}
    assert not stream.continuable and stream.end_event == b""


@pytest.mark.parametrize("kind", ["error", "response.failed"])
def test_responses_in_band_errors(kind: str) -> None:
    assert ResponsesStream().observe(response_event(kind, 3))[0] is Kind.ERROR


def test_the_responses_error_event_follows_the_last_sequence_number() -> None:
    stream = ResponsesStream()
    stream.observe(response_event("response.output_text.delta", 7, delta="a"))

    event = parse_event(stream.error_event("it broke", "upstream_stream_interrupted"))

    assert event.name == "error"
    assert orjson.loads(event.data or b"") == {
        "type": "error",
        "code": "upstream_stream_interrupted",
        "message": "it broke",
        "param": None,
        "sequence_number": 8,
    }


# --- Tokens ---------------------------------------------------------------------------------


def test_a_messages_stream_counts_its_tokens_from_message_start_and_message_delta() -> None:
    stream = MessagesStream()
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "content": [], "usage": {"input_tokens": 8, "output_tokens": 1}},
    }
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 15},
    }

    stream.observe(sse("message_start", start))
    assert (stream.tokens_in, stream.tokens_out) == (8, 1)
    for event in [*message_events("Hi")[1:], sse("message_delta", delta), *finish_events()[2:]]:
        stream.observe(event)

    assert (stream.tokens_in, stream.tokens_out) == (8, 15)  # message_delta's count is final


def test_a_responses_stream_counts_its_tokens_from_the_completed_response() -> None:
    stream = ResponsesStream()
    usage = {"input_tokens": 8, "output_tokens": 5, "total_tokens": 13}

    stream.observe(response_event("response.output_text.delta", 1, delta="Hi"))
    assert (stream.tokens_in, stream.tokens_out) == (None, None)
    stream.observe(response_event("response.completed", 2, response={"id": "r", "usage": usage}))

    assert (stream.tokens_in, stream.tokens_out) == (8, 5)


@pytest.mark.parametrize("kind", [5, ["response.output_text.delta"], {"a": 1}])
def test_a_responses_event_whose_type_is_no_string_is_malformed(kind: Any) -> None:
    event = SseEvent(b"", orjson.dumps({"type": kind, "delta": "x"}))

    assert ResponsesStream().observe(event) == (Kind.MALFORMED, None)


def test_a_sequence_number_past_what_the_error_event_can_follow_is_not_kept() -> None:
    stream = ResponsesStream()
    stream.observe(response_event("response.output_text.delta", 7, delta="a"))
    stream.observe(response_event("response.output_text.delta", 2**64 - 1, delta="b"))

    error = orjson.loads(stream.error_event("cut", "stream_interrupted").split(b"data: ")[1])
    assert error["sequence_number"] == 8
