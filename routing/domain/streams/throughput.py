"""The stream throughput watchdog (pure): abort an upstream attempt whose stream keeps flowing
but carries too little text the client can use.

A stream that sends heartbeats, empty deltas or usage blocks and nothing else never trips an
idle timeout, yet the client waits for nothing. The watchdog counts only *useful* bytes: the
UTF-8 length of generated text (``useful_bytes``, one parsed server-sent event at a time) and
judges the rate over a sliding window (``ThroughputWatchdog.observe``):

* the clock starts at the first event; nothing is judged before ``warmup_ms`` + ``window_ms``;
* the window holds the events with useful bytes of the last ``window_ms``; its rate is
  bytes / max(1, window seconds);
* a window holding some bytes, but fewer than ``min_useful_bytes``, is too small to judge;
  an empty one is judged (and is too slow);
* while the model is reasoning or calling a tool (a *protected* event, until the next event
  with useful text) the stream carries no text by design, so it is never judged;
* below ``min_useful_bytes_per_second``: abort, reason ``throughput_too_low``.

Times are seconds of a monotonic clock, passed in; the settings are in milliseconds.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from resilience.domain.attempts.stream_recovery import WatchdogSettings

THROUGHPUT_TOO_LOW = "throughput_too_low"  # the reason an attempt was aborted
STREAM_THROUGHPUT_TOO_LOW = "STREAM_THROUGHPUT_TOO_LOW"  # the error code the client may see

# An event (by its name or payload "type") or an Anthropic delta of these kinds: the model is
# reasoning or calling a tool. Substring matches: "response.reasoning_summary_text.delta",
# "thinking_delta", "response.function_call_arguments.delta", "tool_use".
_PROTECTED_TYPE = re.compile(r"reasoning|thinking|tool|function_call", re.IGNORECASE)
_PROTECTED_BLOCK = re.compile(r"reasoning|thinking|tool_use", re.IGNORECASE)
_NOTHING = (0, False)


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _text_size(value: Any) -> int:
    return _size(value) if isinstance(value, str) else 0


def _chat_delta(delta: dict[str, Any]) -> tuple[int, bool]:
    """One Chat Completions ``choices[].delta``. Empty tool calls or reasoning are empty
    deltas, not protected ones (providers send ``"reasoning_content": ""`` beside text)."""
    if (
        delta.get("tool_calls")
        or delta.get("function_call") is not None
        or _text_size(delta.get("reasoning_content"))
        or _text_size(delta.get("reasoning"))
    ):
        return 0, True
    return _text_size(delta.get("content")) + _text_size(delta.get("text")), False


def _chat(choices: list[Any]) -> tuple[int, bool]:
    total = 0
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict):
            size, protected = _chat_delta(delta)
            if protected:
                return 0, True
            total += size
    return total, False


def _anthropic(delta: Any, block: Any) -> tuple[int, bool]:
    """An Anthropic ``delta`` object and ``content_block`` (either may be absent)."""
    if isinstance(block, dict) and _PROTECTED_BLOCK.search(str(block.get("type") or "")):
        return 0, True
    if not isinstance(delta, dict):
        return _NOTHING
    if _PROTECTED_TYPE.search(str(delta.get("type") or "")):
        return 0, True
    return _text_size(delta.get("text")), False


def useful_bytes(event_name: str | None, payload: object) -> tuple[int, bool]:
    """(useful UTF-8 bytes, protected) of one server-sent event.

    ``payload`` is the parsed JSON of the event's joined ``data:`` lines, or None (empty,
    ``[DONE]``, not JSON). Useful text: Chat Completions ``choices[].delta.content`` / ``.text``,
    a Responses API string ``delta`` at the root, an Anthropic ``delta.text``. Protected (the
    text of such an event is discarded): an event name or payload ``type`` naming reasoning,
    thinking, a tool or a function call; Chat Completions ``tool_calls`` / ``function_call`` /
    ``reasoning_content`` / ``reasoning``; an Anthropic delta or content block of those kinds.
    Heartbeats, usage-only events and empty deltas are (0, False).
    """
    if not isinstance(payload, dict):
        return _NOTHING
    kind = payload.get("type")
    if (event_name and _PROTECTED_TYPE.search(event_name)) or (
        isinstance(kind, str) and _PROTECTED_TYPE.search(kind)
    ):
        return 0, True
    delta = payload.get("delta")
    if isinstance(delta, str):  # Responses API
        return _size(delta), False
    choices = payload.get("choices")
    if isinstance(choices, list):
        return _chat(choices)
    return _anthropic(delta, payload.get("content_block"))


class ThroughputWatchdog:
    """The decision for one upstream attempt, fed every event of its stream in order."""

    __slots__ = (
        "_enabled",
        "_min_bytes",
        "_min_rate",
        "_protected",
        "_rate_divisor",
        "_ready_after",
        "_samples",
        "_started_at",
        "_window",
        "_window_bytes",
    )

    def __init__(self, settings: WatchdogSettings) -> None:
        self._enabled = settings.enabled
        self._window = settings.window_ms / 1000
        self._ready_after = (settings.warmup_ms + settings.window_ms) / 1000
        self._rate_divisor = max(1.0, self._window)
        self._min_rate = settings.min_useful_bytes_per_second
        self._min_bytes = settings.min_useful_bytes
        self._started_at: float | None = None
        self._samples: deque[tuple[float, int]] = deque()
        self._window_bytes = 0
        self._protected = False

    def observe(self, useful: int, protected: bool, now: float) -> bool:
        """Record one event (``useful_bytes``' answer, at ``now`` seconds); True: abort the
        attempt, reason ``THROUGHPUT_TOO_LOW``. A disabled watchdog records nothing."""
        if not self._enabled:
            return False
        if self._started_at is None:
            self._started_at = now
        if protected:
            self._protected = True  # its text, if any, was never counted
        elif useful > 0:
            self._protected = False
            self._samples.append((now, useful))
            self._window_bytes += useful
        self._drop_older_than(now - self._window)
        if self._protected or now - self._started_at < self._ready_after:
            return False
        window_bytes = self._window_bytes
        if 0 < window_bytes < self._min_bytes:  # some text, too little to judge a rate by
            return False
        return window_bytes / self._rate_divisor < self._min_rate

    def _drop_older_than(self, horizon: float) -> None:
        samples = self._samples
        while samples and samples[0][0] < horizon:
            self._window_bytes -= samples.popleft()[1]
