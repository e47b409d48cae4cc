"""What a Chat Completions stream told the client, and the events of a continuation."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.domain.streams import state as stream_state
from routing.domain.streams.chat import (
    ChatStream,
    Kind,
    content_of,
    continuation_event,
    error_event,
    with_prefill,
)
from routing.domain.streams.sse import SseEvent, parse_event

ENVELOPE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **rest: Any) -> SseEvent:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    payload = {**ENVELOPE, "choices": [choice], **rest}
    return SseEvent(b"", orjson.dumps(payload))


def test_text_deltas_are_tokens_and_the_text_is_kept() -> None:
    stream = ChatStream()
    kinds = [
        stream.observe(chunk({"role": "assistant"}))[0],
        stream.observe(chunk({"content": "Hel"}))[0],
        stream.observe(chunk({"content": "lo"}))[0],
    ]
    assert kinds == [Kind.PREAMBLE, Kind.TOKEN, Kind.TOKEN]
    assert stream.sent_text == "Hello"
    assert stream.envelope == ENVELOPE
    assert stream.continuable and not stream.finished


def test_finish_usage_and_done() -> None:
    stream = ChatStream()
    assert stream.observe(chunk({}, finish="stop"))[0] is Kind.PREAMBLE
    assert stream.finished
    usage = SseEvent(b"", orjson.dumps({**ENVELOPE, "choices": [], "usage": {"total_tokens": 3}}))
    assert stream.observe(usage)[0] is Kind.USAGE
    assert stream.observe(SseEvent(b"", b"[DONE]"))[0] is Kind.DONE


def test_reasoning_is_a_token_but_not_text() -> None:
    stream = ChatStream()
    assert stream.observe(chunk({"reasoning_content": "think"}))[0] is Kind.TOKEN
    assert stream.sent_text == "" and stream.reasoning


def test_a_tool_call_or_a_second_choice_cannot_be_continued() -> None:
    tools = ChatStream()
    assert tools.observe(chunk({"tool_calls": [{"index": 0}]}))[0] is Kind.TOKEN
    assert not tools.continuable
    two = ChatStream()
    payload = {**ENVELOPE, "choices": [{"index": 1, "delta": {"content": "x"}}]}
    two.observe(SseEvent(b"", orjson.dumps(payload)))
    assert not two.continuable


def test_malformed_errors_and_comments() -> None:
    stream = ChatStream()
    assert stream.observe(SseEvent(b"", b'{"choices": ['))[0] is Kind.MALFORMED
    assert stream.observe(SseEvent(b"", b"[1, 2]"))[0] is Kind.MALFORMED
    kind, payload = stream.observe(SseEvent(b"", b'{"error": {"message": "boom"}}'))
    assert kind is Kind.ERROR and payload == {"error": {"message": "boom"}}
    assert stream.observe(SseEvent(b": ping\n\n"))[0] is Kind.PREAMBLE


def test_continuation_event_takes_the_first_envelope_and_drops_role_and_duplicates() -> None:
    payload = {
        "id": "other",
        "object": "chat.completion.chunk",
        "created": 9,
        "model": "n",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "lo world"}}],
    }
    raw = continuation_event(payload, ENVELOPE, skip=2)
    assert raw is not None and raw.startswith(b"data: ") and raw.endswith(b"\n\n")
    sent = orjson.loads(raw[6:])
    assert sent["id"] == "chatcmpl-1" and sent["model"] == "m"
    assert sent["choices"][0]["delta"] == {"content": " world"}
    assert content_of(sent) == " world"


def test_continuation_event_with_nothing_left_is_none_but_a_finish_is_kept() -> None:
    payload = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ab"}}]}
    assert continuation_event(payload, ENVELOPE, skip=2) is None
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    raw = continuation_event(finish, ENVELOPE)
    assert raw is not None and orjson.loads(raw[6:])["choices"][0]["finish_reason"] == "stop"


def test_with_prefill_appends_the_sent_text_as_an_assistant_message() -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    prefilled = with_prefill(payload, "Hel")
    assert prefilled["messages"][-1] == {"role": "assistant", "content": "Hel"}
    assert payload["messages"] == [{"role": "user", "content": "hi"}]  # the original is intact


def test_error_event_is_one_openai_error_object() -> None:
    raw = error_event("it broke", "upstream_stream_interrupted")
    assert orjson.loads(raw[6:]) == {
        "error": {
            "message": "it broke",
            "type": "upstream_error",
            "code": "upstream_stream_interrupted",
        }
    }


def test_with_several_choices_the_answer_finishes_when_every_choice_has() -> None:
    stream = ChatStream()

    def choices(*items: dict[str, Any]) -> SseEvent:
        return SseEvent(b"", orjson.dumps({**ENVELOPE, "choices": list(items)}))

    stream.observe(choices({"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {}}))
    stream.observe(choices({"index": 0, "delta": {}, "finish_reason": "stop"}))
    assert not stream.finished  # choice 1 is still open
    stream.observe(choices({"index": 1, "delta": {}, "finish_reason": "stop"}))
    assert stream.finished


def test_an_error_field_that_is_null_is_not_an_error() -> None:
    kind, _ = ChatStream().observe(SseEvent(b"", b'{"error": null, "choices": []}'))
    assert kind is Kind.PREAMBLE


def test_the_kept_text_is_bounded_and_a_stream_past_it_keeps_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream_state, "RECOVERY_TEXT_MAX_CHARS", 5)
    stream = ChatStream()
    stream.observe(chunk({"content": "Hel"}))
    stream.observe(chunk({"content": "lo"}))
    assert stream.text == ["Hel", "lo"] and not stream.text.overflowed  # 5: still kept

    assert stream.observe(chunk({"content": "!"}))[0] is Kind.TOKEN  # still relayed
    stream.observe(chunk({"content": "?"}))
    assert stream.text == [] and stream.text.overflowed and stream.sent_text == ""


USAGE = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}


def raw_event(payload: dict[str, Any]) -> SseEvent:
    return parse_event(b"data: " + orjson.dumps(payload) + b"\n\n")


def test_the_usage_block_gives_the_tokens() -> None:
    stream = ChatStream()
    assert (stream.tokens_in, stream.tokens_out) == (None, None)

    stream.observe(raw_event({**ENVELOPE, "choices": [], "usage": USAGE}))

    assert (stream.tokens_in, stream.tokens_out) == (9, 4)


def test_a_client_that_asked_for_usage_gets_the_event_as_it_came() -> None:
    event = raw_event({**ENVELOPE, "choices": [], "usage": USAGE})
    before = event.raw

    ChatStream().observe(event)

    assert event.raw == before


def test_the_usage_only_chunk_is_sent_as_nothing_to_a_client_that_did_not_ask() -> None:
    stream = ChatStream(hide_usage=True)
    event = raw_event({**ENVELOPE, "choices": [], "usage": USAGE})

    kind, payload = stream.observe(event)

    assert kind is Kind.USAGE  # still an answering event for the idle limit
    assert event.raw == b"" and payload is not None and "usage" not in payload
    assert (stream.tokens_in, stream.tokens_out) == (9, 4)  # counted all the same


def test_a_chunk_with_choices_and_usage_loses_only_its_usage() -> None:
    stream = ChatStream(hide_usage=True)
    event = raw_event({**ENVELOPE, "choices": [_finish_choice()], "usage": USAGE})

    stream.observe(event)

    sent = orjson.loads(event.raw.removeprefix(b"data: "))
    assert sent == {**ENVELOPE, "choices": [_finish_choice()]}
    assert event.raw.endswith(b"\n\n") and stream.finished
    assert (stream.tokens_in, stream.tokens_out) == (9, 4)


def test_a_null_usage_is_left_as_it_is() -> None:
    event = raw_event({**ENVELOPE, "choices": [_finish_choice()], "usage": None})
    before = event.raw

    ChatStream(hide_usage=True).observe(event)

    assert event.raw == before


def _finish_choice() -> dict[str, Any]:
    return {"index": 0, "delta": {}, "finish_reason": "stop"}


@pytest.mark.parametrize("index", [[0], {"i": 0}, "0"])
def test_a_choice_index_that_is_no_integer_is_not_followed(index: Any) -> None:
    """A list once reached a set (unhashable): the request was a 500, or its stream hung."""
    stream = ChatStream()
    payload = {**ENVELOPE, "choices": [{"index": index, "delta": {"content": "a"}}]}

    stream.observe(SseEvent(b"", orjson.dumps(payload)))

    assert not stream.continuable and list(stream.text) == []
