"""Retry hints from arbitrary upstream headers and bodies: never an exception, and every hint a
positive whole number of milliseconds within the module's caps."""

from __future__ import annotations

import math
from datetime import tzinfo
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resilience.domain.classify.retry_hints import (
    MAX_HINT_MS,
    MAX_SHORT_HINT_MS,
    HintSource,
    RetryHint,
    declared_retry_delay_seconds,
    detect_retry_hint,
    ms_until_next_local_hour,
    ms_until_next_local_midnight,
    parse_delay_ms,
    reset_at_from_headers,
    text_hint_ms,
)
from tests.fuzz.conftest import counted
from tests.fuzz.strategies import BODIES, HEADERS, NOW, TZ, any_json

pytestmark = pytest.mark.fuzz

_DST_SLACK_MS = 25 * 3_600_000  # a local day is at most 25 hours long


def assert_bounded(hint: RetryHint | None) -> None:
    if hint is None:
        return
    assert isinstance(hint.ms, int)
    assert 0 < hint.ms <= MAX_HINT_MS
    assert hint.source in set(HintSource)
    if hint.source is HintSource.GOOGLE_RPC_RETRY_INFO:
        assert hint.ms <= MAX_SHORT_HINT_MS


@given(HEADERS, BODIES, NOW, TZ)
@counted
def test_detect_retry_hint(headers: dict[str, str], text: str, now: float, tz: tzinfo) -> None:
    hint = detect_retry_hint(headers, text, now=now, tz=tz)

    assert_bounded(hint)
    assert detect_retry_hint(headers, text, now=now, tz=tz) == hint  # pure: same input, same hint


@given(HEADERS, NOW, TZ)
@counted
def test_header_hint(headers: dict[str, str], now: float, tz: tzinfo) -> None:
    reset_at = reset_at_from_headers(headers, now=now, tz=tz)
    hint = detect_retry_hint(headers, "", now=now, tz=tz)

    assert reset_at is None or math.isfinite(reset_at)
    assert_bounded(hint)
    if hint is not None:  # with no body, only a header can have spoken
        assert hint.source is HintSource.HEADER
        assert reset_at is not None and reset_at > now


@given(BODIES, NOW, TZ)
@counted
def test_text_hint(text: str, now: float, tz: tzinfo) -> None:
    ms = text_hint_ms(text, now=now, tz=tz)
    declared = declared_retry_delay_seconds(text)

    assert ms is None or (isinstance(ms, int) and 0 < ms <= MAX_HINT_MS)
    assert declared is None or (isinstance(declared, float) and declared >= 0)


@given(st.one_of(any_json(), st.text(max_size=30), st.floats()))
@counted
def test_parse_delay(value: Any) -> None:
    ms = parse_delay_ms(value)

    assert ms is None or isinstance(ms, int)


@given(NOW, TZ, st.integers(min_value=0, max_value=23))
@counted
def test_local_resets(now: float, tz: tzinfo, hour: int) -> None:
    midnight = ms_until_next_local_midnight(now=now, tz=tz)
    at_hour = ms_until_next_local_hour(hour, now=now, tz=tz)

    assert 0 < midnight <= _DST_SLACK_MS
    assert 0 < at_hour <= _DST_SLACK_MS
