"""Pure tests of retry-hint parsing: headers, JSON bodies, text forms, caps and local midnight."""

from __future__ import annotations

import json
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

import pytest

from resilience.domain.classify.retry_hints import (
    DAY_MS,
    MAX_HINT_MS,
    HintSource,
    RetryHint,
    declared_retry_delay_seconds,
    detect_retry_hint,
    header_value,
    json_body_hint,
    ms_until_next_local_hour,
    ms_until_next_local_midnight,
    parse_delay_ms,
    reset_at_from_headers,
    text_hint_ms,
)

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC, 23:13:20 in Paris
PARIS = ZoneInfo("Europe/Paris")
HEADER, GOOGLE, BODY = HintSource.HEADER, HintSource.GOOGLE_RPC_RETRY_INFO, HintSource.BODY


def iso(offset_s: float, tz: tzinfo = UTC) -> str:
    return datetime.fromtimestamp(T0 + offset_s, tz).isoformat()


def google_body(delay: str, *, nested: bool = True) -> str:
    detail = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
    details = {"details": [{"@type": "type.googleapis.com/google.rpc.Help"}, detail]}
    return json.dumps({"error": {"code": 429, **details}} if nested else details)


def hint(headers: dict[str, str] | None = None, text: str = "") -> RetryHint | None:
    return detect_retry_hint(headers or {}, text, now=T0, tz=UTC)


# -- headers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "30"}, RetryHint(30_000, HEADER)),
        ({"retry-after": " 7 "}, RetryHint(7_000, HEADER)),
        ({"Retry-After": "12"}, RetryHint(12_000, HEADER)),
        ({"retry-after": "Tue, 14 Nov 2023 22:14:20 GMT"}, RetryHint(60_000, HEADER)),
        ({"retry-after": iso(90)}, RetryHint(90_000, HEADER)),
        ({"x-ratelimit-reset": str(int(T0) + 45)}, RetryHint(45_000, HEADER)),
        ({"x-ratelimit-reset": str(int(T0 * 1000) + 45_000)}, RetryHint(45_000, HEADER)),
        ({"x-ratelimit-reset": f"{int(T0) + 5}.75"}, RetryHint(5_000, HEADER)),
        # not a whole integer and not a date: X-RateLimit-Reset is read instead
        ({"retry-after": "30s", "x-ratelimit-reset": str(int(T0) + 8)}, RetryHint(8_000, HEADER)),
        ({"retry-after": "30", "x-ratelimit-reset": str(int(T0) + 8)}, RetryHint(30_000, HEADER)),
        ({"retry-after": "0"}, None),
        ({"retry-after": "garbage"}, None),
        ({"x-ratelimit-reset": "60"}, None),  # an epoch in 1970: in the past
        # a parsed but past Retry-After decides: no fallback to X-RateLimit-Reset
        ({"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT", "x-ratelimit-reset": "1700000100"}, None),
        ({"retry-after": "99999999999"}, RetryHint(MAX_HINT_MS, HEADER)),
        ({"x-ratelimit-reset": str(int(T0) + 40 * 86_400)}, RetryHint(MAX_HINT_MS, HEADER)),
    ],
)
def test_header_hints(headers: dict[str, str], expected: RetryHint | None) -> None:
    assert hint(headers) == expected


def test_reset_at_from_headers_reports_the_instant_even_in_the_past() -> None:
    assert reset_at_from_headers({"x-ratelimit-reset": "1700000100"}, now=T0, tz=UTC) == 1.7e9 + 100
    assert reset_at_from_headers({"x-ratelimit-reset": "100"}, now=T0, tz=UTC) == 100.0
    assert reset_at_from_headers({}, now=T0, tz=UTC) is None


def test_header_value_ignores_case() -> None:
    assert header_value({"X-RateLimit-Reset": "1"}, "x-ratelimit-reset") == "1"
    assert header_value({"retry-after": "2"}, "retry-after") == "2"
    assert header_value({}, "retry-after") is None


def test_a_header_hint_beats_the_body() -> None:
    assert hint({"retry-after": "5"}, google_body("40s")) == RetryHint(5_000, HEADER)


# -- JSON bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (google_body("12s"), RetryHint(12_000, GOOGLE)),
        (google_body("1.5s"), RetryHint(1_500, GOOGLE)),
        (google_body("26.660853464s"), RetryHint(26_661, GOOGLE)),
        (google_body("1500ms", nested=False), RetryHint(1_500, GOOGLE)),
        (google_body("2m"), RetryHint(120_000, GOOGLE)),
        (google_body("200000s"), RetryHint(DAY_MS, GOOGLE)),  # short hints: 24 h at most
        (google_body("0s"), None),
        ('{"error": {"retry_after": 20}}', RetryHint(20_000, BODY)),
        ('{"retry_after": "7.5"}', RetryHint(7_500, BODY)),
        (json.dumps({"error": {"retryAfter": iso(300)}}), RetryHint(300_000, BODY)),
        ('{"retryAfter": 3}', RetryHint(3_000, BODY)),
        ('{"error": {"retry_after_ms": 1500}}', RetryHint(1_500, BODY)),
        ('{"retryAfterMs": 2500}', RetryHint(2_500, BODY)),
        (json.dumps({"error": {"resets_at": int(T0) + 600}}), RetryHint(600_000, BODY)),
        (json.dumps({"resetsAt": int(T0 * 1000) + 600_000}), RetryHint(600_000, BODY)),
        (json.dumps({"resets_at": iso(60)}), RetryHint(60_000, BODY)),
        ('{"retry_after_ms": 99999999999}', RetryHint(MAX_HINT_MS, BODY)),
        (json.dumps({"error": {"retryAfter": iso(-60)}}), None),
        ('{"error": {"message": "slow down"}}', None),
        ('{"retry_after": true}', None),
        ("[1, 2]", None),
        ("not json", None),
        ("", None),
    ],
)
def test_json_body_hints(body: str, expected: RetryHint | None) -> None:
    assert json_body_hint(body, now=T0, tz=UTC) == expected
    assert hint({}, body) == expected


def test_the_nested_error_object_wins_over_the_root() -> None:
    body = '{"retry_after": 50, "error": {"retry_after": 5}}'
    assert json_body_hint(body, now=T0, tz=UTC) == RetryHint(5_000, BODY)


# -- text forms ----------------------------------------------------------------------------------

TEXT_CASES = [
    ("Please retry in 26.660853464s.", 26_661),
    ("please retry in 5 s", 5_000),
    ("Please retry in 100000s", DAY_MS),  # short hint cap
    (f"Rate limited, try again at {iso(120)}", 120_000),
    (f"wait until {iso(30)} please", 30_000),
    (f"quota reset at {iso(3_600)}", 3_600_000),
    (f"Your limit resets at {iso(60)}", 60_000),
    (f"capacity available at {iso(600)}", 600_000),
    (f"retry after {iso(45)}", 45_000),
    ("try again at 2023-11-14T22:15:20Z", 120_000),
    ("try again at 2023-11-14T23:15:20+01:00", 120_000),
    ("try again at 2023-11-14T23:15:20+0100", 120_000),
    ("try again at 2023-11-14 22:15:20.123456789Z", 120_123),
    ("try again at 2023-11-14T22:00:00Z", None),  # in the past
    ("quota resets after 1h2m3s", 3_723_000),
    ("quota reset after 45s", 45_000),
    ("Your quota will reset after 2h", 7_200_000),
    ("Individual quota reached. Resets in 164h27m24s.", 592_044_000),
    ("resets in 1h 30m", 5_400_000),
    ("Resets in 1000h", MAX_HINT_MS),
    ("Your quota will reset in 3 days.", 3 * DAY_MS),
    ("Monthly usage limit reached. Resets in 13 days", 13 * DAY_MS),
    ("resets in 1 day", DAY_MS),
    ("resets in 45 days", MAX_HINT_MS),
    ("resets in 0 days", None),
    ("rate limit exceeded", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected_ms"), TEXT_CASES)
def test_text_hints(text: str, expected_ms: int | None) -> None:
    assert text_hint_ms(text, now=T0, tz=UTC) == expected_ms
    found = hint({}, text)
    assert found == (RetryHint(expected_ms, BODY) if expected_ms else None)


def test_a_timestamp_without_offset_is_local_time_in_tz() -> None:
    text = "try again at 2023-11-14T23:15:20"  # Paris wall clock = 22:15:20 UTC
    assert text_hint_ms(text, now=T0, tz=PARIS) == 120_000
    assert text_hint_ms(text, now=T0, tz=UTC) == 3_720_000


def test_text_reads_the_json_body_first() -> None:
    assert text_hint_ms(google_body("9s"), now=T0, tz=UTC) == 9_000
    assert hint({}, google_body("9s")) == RetryHint(9_000, GOOGLE)


# -- delays, declared windows, local clocks ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("33s", 33_000),
        ("1.5s", 1_500),
        ("1500ms", 1_500),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("12", 12_000),
        (" 4 s ", 4_000),
        (2, 2_000),
        (0.25, 250),
        ("soon", None),
        ("-3s", None),
        (None, None),
        (True, None),
        (float("inf"), None),
        (1e306, None),  # finite in seconds, infinite in milliseconds (found by fuzzing)
    ],
)
def test_parse_delay_ms(value: object, expected: int | None) -> None:
    assert parse_delay_ms(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please retry in 38.9s", 38.9),
        (google_body("50s"), 50.0),
        (google_body("7200s"), 7200.0),
        ('{"error": {"details": [{"retryDelay": "5s"}]}}', None),  # not a RetryInfo detail
        ("daily limit reached", None),
    ],
)
def test_declared_retry_delay_seconds(text: str, expected: float | None) -> None:
    assert declared_retry_delay_seconds(text) == expected


def test_an_absurd_numeric_retry_delay_is_no_hint_and_no_exception() -> None:
    # 1e306 seconds overflowed to an infinite millisecond count, then int() raised
    body = json.dumps(
        {"error": {"details": [{"@type": "google.rpc.RetryInfo", "retryDelay": 1e306}]}}
    )

    assert hint(text=body) is None
    assert declared_retry_delay_seconds(body) is None


def test_integers_of_hundreds_of_digits_are_clamped_not_overflowed() -> None:
    # float(-10**400) and 10**400 * 1000 / 1000 raised OverflowError from the JSON body paths
    retry_info = {"@type": "google.rpc.RetryInfo", "retryDelay": 10**400}
    huge_delay = json.dumps({"error": {"details": [retry_info]}})
    past_reset = json.dumps({"error": {"resets_at": -(10**400)}})

    assert hint(text=huge_delay) == RetryHint(DAY_MS, GOOGLE)
    assert declared_retry_delay_seconds(huge_delay) == MAX_HINT_MS / 1000 + 1
    assert hint(text=past_reset) is None


@pytest.mark.parametrize(
    "text",
    [
        "quota exceeded, resets in " + "9" * 5000 + " days",
        "resets after " + "9" * 5000 + "h",
        "limit reached, resets in " + "9" * 5000 + "s",
    ],
)
def test_a_count_of_thousands_of_digits_is_the_cap_not_an_exception(text: str) -> None:
    # int() refuses a text of over 4 300 digits: the countdown forms saturate instead
    assert hint(text=text) == RetryHint(MAX_HINT_MS, BODY)


def test_header_counts_of_thousands_of_digits_are_capped_not_an_exception() -> None:
    huge = "9" * 5000

    assert reset_at_from_headers({"retry-after": huge}, now=T0, tz=UTC) is not None
    assert reset_at_from_headers({"x-ratelimit-reset": huge}, now=T0, tz=UTC) is not None


@pytest.mark.parametrize(
    ("now", "tz", "expected_ms"),
    [
        (T0, UTC, 6_400_000),  # 22:13:20 → midnight
        (T0, PARIS, 2_800_000),  # 23:13:20 Paris → midnight
        (1_711_796_400.0, PARIS, 12 * 3_600_000),  # 2024-03-30 12:00 Paris
        (1_711_841_400.0, PARIS, 22 * 3_600_000 + 1_800_000),  # 00:30 on the 23 h DST day
    ],
)
def test_ms_until_next_local_midnight(now: float, tz: tzinfo, expected_ms: int) -> None:
    assert ms_until_next_local_midnight(now=now, tz=tz) == expected_ms


@pytest.mark.parametrize(
    ("hour", "tz", "expected_ms"),
    [
        (23, UTC, 2_800_000),  # later today
        (22, UTC, 86_400_000 - 800_000),  # passed: tomorrow
        (0, PARIS, 2_800_000),
        (8, PARIS, 8 * 3_600_000 + 2_800_000),
    ],
)
def test_ms_until_next_local_hour(hour: int, tz: tzinfo, expected_ms: int) -> None:
    assert ms_until_next_local_hour(hour, now=T0, tz=tz) == expected_ms


def test_an_exact_reset_instant_moves_to_the_next_day() -> None:
    at_23 = T0 + 2_800  # 23:00:00 UTC
    assert ms_until_next_local_hour(23, now=at_23, tz=UTC) == DAY_MS


HUGE = "9" * 400


@pytest.mark.parametrize(
    ("headers", "text", "expected"),
    [
        ({"retry-after": HUGE}, "", RetryHint(MAX_HINT_MS, HEADER)),
        ({"x-ratelimit-reset": HUGE}, "", RetryHint(MAX_HINT_MS, HEADER)),
        ({}, f'{{"resets_at": {HUGE}}}', RetryHint(MAX_HINT_MS, BODY)),
        ({}, f'{{"retry_after_ms": {HUGE}}}', RetryHint(MAX_HINT_MS, BODY)),
        ({}, '{"retry_after": 1e400}', None),
        ({}, google_body(HUGE + "s"), None),
        ({}, f"resets in {HUGE}h", RetryHint(MAX_HINT_MS, BODY)),
        ({}, f"resets in {HUGE} days", RetryHint(MAX_HINT_MS, BODY)),
        ({}, "try again at 9999-12-31T23:59:59Z", RetryHint(MAX_HINT_MS, BODY)),
        ({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, "", RetryHint(MAX_HINT_MS, HEADER)),
    ],
)
def test_absurd_upstream_numbers_are_capped_without_crashing(
    headers: dict[str, str], text: str, expected: RetryHint | None
) -> None:
    assert hint(headers, text) == expected
