"""The stream throughput watchdog, pure: what counts as useful text in each wire format, and
when an attempt is aborted (times are plain seconds)."""

from __future__ import annotations

from typing import Any

import pytest

from resilience.domain.attempts.stream_recovery import WatchdogSettings
from routing.domain.streams.throughput import ThroughputWatchdog, useful_bytes

Event = tuple[str | None, Any]


def _chat(**delta: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


def _responses(kind: str, delta: str) -> Event:
    return kind, {"type": kind, "delta": delta}


def _anthropic_delta(**delta: Any) -> Event:
    return "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}


def _anthropic_block(**block: Any) -> Event:
    return "content_block_start", {"type": "content_block_start", "content_block": block}


# --- useful bytes per event ---------------------------------------------------------------------

CHAT_CASES: list[tuple[Event, tuple[int, bool]]] = [
    ((None, _chat(content="hello")), (5, False)),
    ((None, _chat(content="héllo")), (6, False)),  # UTF-8 bytes, not characters
    ((None, _chat(text="abc")), (3, False)),
    ((None, _chat(role="assistant", content="")), (0, False)),  # an empty delta
    ((None, _chat()), (0, False)),
    ((None, _chat(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}])), (0, True)),
    ((None, _chat(function_call={"name": "lookup"})), (0, True)),
    ((None, _chat(reasoning_content="let me think", content="x")), (0, True)),  # text dropped
    ((None, _chat(reasoning="hmm")), (0, True)),
    ((None, _chat(reasoning_content="", content="ok")), (2, False)),  # empty reasoning
    ((None, _chat(reasoning_content=None, tool_calls=None, content="ok")), (2, False)),
    (
        (None, {"choices": [{"delta": {"content": "ab"}}, {"delta": {"content": "cde"}}]}),
        (5, False),
    ),
    ((None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}}), (0, False)),
    ((None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}), (0, False)),
]
RESPONSES_CASES: list[tuple[Event, tuple[int, bool]]] = [
    (_responses("response.output_text.delta", "Hi €"), (6, False)),
    (_responses("response.output_text.delta", ""), (0, False)),
    (_responses("response.reasoning_summary_text.delta", "I should"), (0, True)),
    (_responses("response.reasoning_text.delta", "step 1"), (0, True)),
    (_responses("response.function_call_arguments.delta", '{"city":'), (0, True)),
    (("response.reasoning_text.delta", {"delta": "x"}), (0, True)),  # the event name alone
    ((None, {"type": "response.custom_tool_call_input.delta", "delta": "x"}), (0, True)),
    (("response.completed", {"type": "response.completed", "response": {}}), (0, False)),
]
ANTHROPIC_CASES: list[tuple[Event, tuple[int, bool]]] = [
    (_anthropic_delta(type="text_delta", text="Hello"), (5, False)),
    (_anthropic_delta(type="text_delta", text=""), (0, False)),
    (_anthropic_delta(type="thinking_delta", thinking="Let me see"), (0, True)),
    (_anthropic_delta(type="reasoning_delta", text="dropped"), (0, True)),
    (_anthropic_delta(type="input_json_delta", partial_json='{"a"'), (0, False)),
    (_anthropic_delta(type="signature_delta", signature="abc"), (0, False)),
    (_anthropic_block(type="tool_use", id="t1", name="lookup", input={}), (0, True)),
    (_anthropic_block(type="thinking", thinking=""), (0, True)),
    (_anthropic_block(type="redacted_thinking", data="..."), (0, True)),
    (_anthropic_block(type="text", text=""), (0, False)),
    (("ping", {"type": "ping"}), (0, False)),
    (("message_start", {"type": "message_start", "message": {"usage": {}}}), (0, False)),
    (
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        (0, False),
    ),
]
NO_PAYLOAD_CASES: list[tuple[Event, tuple[int, bool]]] = [
    ((None, None), (0, False)),  # empty data, [DONE], not JSON
    (("message", None), (0, False)),
    ((None, ["not", "an", "object"]), (0, False)),
    ((None, "a string"), (0, False)),
]


@pytest.mark.parametrize(
    ("event", "expected"),
    CHAT_CASES + RESPONSES_CASES + ANTHROPIC_CASES + NO_PAYLOAD_CASES,
)
def test_useful_bytes(event: Event, expected: tuple[int, bool]) -> None:
    assert useful_bytes(*event) == expected


# --- the watchdog's decision ----------------------------------------------------------------------

# Ready 20 s after the first event; 4 B/s over 10 s means at least 40 bytes in the window.
SETTINGS = WatchdogSettings(
    enabled=True, warmup_ms=10_000, window_ms=10_000, min_useful_bytes_per_second=4
)


def _feed(watchdog: ThroughputWatchdog, events: list[tuple[float, int, bool]]) -> list[bool]:
    return [watchdog.observe(useful, protected, now) for now, useful, protected in events]


def test_nothing_is_judged_before_warmup_and_window_have_passed() -> None:
    watchdog = ThroughputWatchdog(SETTINGS)
    assert _feed(watchdog, [(100.0, 0, False), (110.0, 0, False), (119.9, 0, False)]) == [
        False,
        False,
        False,
    ]
    assert watchdog.observe(0, False, 120.0)  # 20 s after the first event, not after 0


def test_an_empty_window_after_warmup_aborts() -> None:
    watchdog = ThroughputWatchdog(SETTINGS)
    events = [(0.0, 500, False), (9.0, 0, False), (20.0, 0, False)]
    assert _feed(watchdog, events) == [False, False, True]  # the 500 bytes are 11 s old


@pytest.mark.parametrize(("window_bytes", "aborts"), [(40, False), (39, True), (41, False)])
def test_the_rate_threshold(window_bytes: int, aborts: bool) -> None:
    watchdog = ThroughputWatchdog(SETTINGS)
    events = [(0.0, 0, False), (15.0, window_bytes - 1, False), (16.0, 1, False)]

    assert _feed(watchdog, events) == [False, False, False]
    assert watchdog.observe(0, False, 20.0) is aborts  # 40 B / 10 s = exactly 4 B/s is enough


def test_samples_older_than_the_window_drop() -> None:
    at_edge, too_old = ThroughputWatchdog(SETTINGS), ThroughputWatchdog(SETTINGS)
    _feed(at_edge, [(0.0, 0, False), (10.0, 100, False)])
    _feed(too_old, [(0.0, 0, False), (9.9, 100, False)])

    assert not at_edge.observe(0, False, 20.0)  # 10.0 is not older than 20 - 10
    assert too_old.observe(0, False, 20.0)
    assert not at_edge.observe(100, False, 29.0)
    assert at_edge.observe(0, False, 40.0)  # both samples have left the window


def test_a_window_too_small_to_judge_is_not_judged() -> None:
    settings = WatchdogSettings(enabled=True, warmup_ms=0, window_ms=10_000, min_useful_bytes=50)
    watchdog = ThroughputWatchdog(settings)

    assert _feed(watchdog, [(0.0, 30, False), (10.0, 0, False)]) == [False, False]  # 3 B/s
    assert watchdog.observe(0, False, 20.5)  # the 30 bytes left: an empty window is judged


def test_the_rate_divides_by_at_least_one_second() -> None:
    settings = WatchdogSettings(enabled=True, warmup_ms=0, window_ms=500)
    slow, enough = ThroughputWatchdog(settings), ThroughputWatchdog(settings)

    # 3 bytes in a half-second window: 3 B/s (not 6 B/s), below 4.
    assert _feed(slow, [(0.0, 0, False), (1.0, 3, False)]) == [False, True]
    assert _feed(enough, [(0.0, 0, False), (1.0, 4, False)]) == [False, False]


def test_a_protected_phase_never_aborts_and_ends_with_useful_text() -> None:
    watchdog = ThroughputWatchdog(SETTINGS)
    thinking = [(0.0, 0, True), *((float(t), 0, False) for t in range(10, 300, 10))]

    assert not any(_feed(watchdog, thinking))
    assert _feed(watchdog, [(300.0, 0, True), (301.0, 0, False)]) == [False, False]
    assert watchdog.observe(5, False, 302.0)  # text again: judged, 5 B / 10 s is too slow


def test_a_disabled_watchdog_never_aborts() -> None:
    watchdog = ThroughputWatchdog(WatchdogSettings(enabled=False, warmup_ms=0, window_ms=1_000))
    assert not any(_feed(watchdog, [(float(t), 0, False) for t in range(0, 1_000, 5)]))


# --- both together: a protected phase, event by event, in each wire format ----------------------

PHASES: dict[str, list[Event]] = {
    "chat": [
        (None, _chat(content="hello world!")),
        (None, _chat(reasoning_content="let me think")),
        (None, _chat(content="")),
        (None, _chat(content="ok")),
    ],
    "responses": [
        _responses("response.output_text.delta", "hello world!"),
        _responses("response.function_call_arguments.delta", '{"city":'),
        (None, None),
        _responses("response.output_text.delta", "ok"),
    ],
    "anthropic": [
        _anthropic_delta(type="text_delta", text="hello world!"),
        _anthropic_block(type="tool_use", id="t1", name="lookup", input={}),
        _anthropic_delta(type="input_json_delta", partial_json='{"city":'),
        _anthropic_delta(type="text_delta", text="ok"),
    ],
}


@pytest.mark.parametrize("wire", list(PHASES))
def test_a_protected_phase_in_each_wire_format(wire: str) -> None:
    # Ready 1 s after the first event; 12 bytes, then a tool call or reasoning, then 2 bytes.
    settings = WatchdogSettings(enabled=True, warmup_ms=0, window_ms=1_000)
    watchdog = ThroughputWatchdog(settings)
    times = [0.0, 1.0, 5.0, 6.0]

    aborts = [
        watchdog.observe(*useful_bytes(*event), now)
        for now, event in zip(times, PHASES[wire], strict=True)
    ]

    # The silent event at 5 s would abort outside the phase; the 2 bytes at 6 s end it.
    assert aborts == [False, False, False, True]
