"""Pure tests of the secret scrubber and of the logging filter built on it."""

from __future__ import annotations

import base64
import logging
import sys
import time
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from django.conf import settings

from omniroute.core.logging import ScrubbingFilter
from omniroute.core.scrub import REDACTED, SHORTEST_SHAPE, scrub, scrub_bytes

OWN_SECRET = "upstream-own-key-0123"  # shaped like nothing: only the caller knows it
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dGhpcyBpcyBhIHNpZ25hdHVyZQ"

# (name, text, what the scrubbed text is)
REDACTED_ROWS: list[tuple[str, str, str]] = [
    (
        "bearer token keeps the word",
        "Authorization: Bearer abcdEFGH1234ijklMNOP5678",
        f"Authorization: Bearer {REDACTED}",
    ),
    ("lower-case bearer", "bearer abcdEFGH1234ijklMNOP5678.x", f"bearer {REDACTED}"),
    ("bearer sk key", "got Bearer sk-abcdefghijklmnop1234 here", f"got Bearer {REDACTED} here"),
    (
        "sk key",
        "Incorrect API key provided: sk-abcdefghijklmnop1234.",
        f"Incorrect API key provided: {REDACTED}.",
    ),
    ("sk_ key", "key sk_live_0123456789abcdefXYZ ok", f"key {REDACTED} ok"),
    ("anthropic key", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-wxyz", REDACTED),
    ("project key", "(sk-proj-AbCdEfGhIjKlMnOpQrStUv_wxyz)", f"({REDACTED})"),
    ("rk key", "rk-live-0123456789abcdef0123", REDACTED),
    ("pk key", "pk_test_0123456789abcdef0123", REDACTED),
    ("key=", "url?key=AIzaSyA-0123456789abcdefghijklmno&x=1", f"url?key={REDACTED}&x=1"),
    ("api_key:", "api_key: 0123456789abcdef0123456789abcdef", f"api_key: {REDACTED}"),
    (
        "json api_key",
        '{"api_key": "0123456789abcdef0123456789abcdef"}',
        f'{{"api_key": "{REDACTED}"}}',
    ),
    (
        "x-api-key header",
        "x-api-key: QUJDREVGR0hJSktMTU5PUFFSU1RVVldY==",
        f"x-api-key: {REDACTED}",
    ),
    ("jwt", f"token was {JWT} expired", f"token was {REDACTED} expired"),
    ("own secret", f"the key {OWN_SECRET} is revoked", f"the key {REDACTED} is revoked"),
    ("own secret twice", f"{OWN_SECRET}/{OWN_SECRET}", f"{REDACTED}/{REDACTED}"),
    ("github token", "ghp_" + "a" * 36, REDACTED),
    # The key's name matches case-insensitively as Unicode folds it (a Kelvin sign is a "k").
    ("folded key name", "\u212aEY=0123456789abcdef0123456789", f"\u212aEY={REDACTED}"),
]

UNCHANGED = [
    "The model is overloaded. Please try again later.",
    "This model's maximum context length is 8192 tokens; you requested 9000 tokens.",
    "model gpt-4o-mini and claude-3-5-sonnet-20241022 and gemini-1.5-pro-002",
    "request id req_0123456789abcdef0123, chatcmpl-AbCdEf0123456789",
    "trace deadbeef cafe1234 0xff00ff",
    "Bearer token missing or invalid",
    "Use a Bearer authentication header",
    "max_tokens=12345678901234567890123 is too large",
    "the task-force-management-group-meeting and a risk_assessment_for_everyone",
    "your key is too short: key=abc123",
    "short sk-abc is no key",
    "",
]


@pytest.mark.parametrize(
    ("text", "expected"), [r[1:] for r in REDACTED_ROWS], ids=[r[0] for r in REDACTED_ROWS]
)
def test_scrub_redacts(text: str, expected: str) -> None:
    assert scrub(text, [OWN_SECRET]) == expected


@pytest.mark.parametrize("text", UNCHANGED)
def test_scrub_leaves_ordinary_text_alone(text: str) -> None:
    assert scrub(text, [OWN_SECRET]) == text


# The shortest text each credential shape matches.
SHORTEST_OF_EACH_SHAPE = [
    "eyJ01234567.01234567.",
    "bearer 0123456789abcdef",
    "key=0123456789abcdef0123",
    "sk-0123456789abcdef",
    "xoxb-0123456789",
    "AKIA0123456789ABCDEF",
    "AIza" + "0" * 30,
    "ghp_" + "0" * 30,
]


@pytest.mark.parametrize("text", SHORTEST_OF_EACH_SHAPE)
def test_no_shape_matches_text_shorter_than_the_shortcut_skips(text: str) -> None:
    assert scrub(text) == REDACTED or scrub(text).endswith(REDACTED)
    assert scrub(text[:-1]) == text[:-1]  # one character less is no longer that shape
    assert len(text) >= SHORTEST_SHAPE


def test_a_short_text_is_still_searched_for_the_callers_own_secret() -> None:
    assert scrub("x 12345678", ["12345678"]) == f"x {REDACTED}"


def test_scrub_ignores_empty_missing_and_short_secrets() -> None:
    text = "status ok: the model answered short"
    assert scrub(text, [None, "", "ok", "short"]) == text


def test_a_secret_containing_another_is_replaced_whole() -> None:
    assert scrub("a sk-xyz-12345678 b", ["sk-xyz", "sk-xyz-12345678"]) == f"a {REDACTED} b"


def test_scrub_bytes_returns_the_same_object_when_nothing_matched() -> None:
    body = b'{"error": {"message": "overloaded", "code": 503}}'
    assert scrub_bytes(body, [OWN_SECRET]) is body


def test_scrub_bytes_redacts_and_tolerates_bad_utf8() -> None:
    body = b"\xff bad " + OWN_SECRET.encode() + b" Bearer sk-abcdefghijklmnop1234"
    scrubbed = scrub_bytes(body, [OWN_SECRET])
    assert OWN_SECRET.encode() not in scrubbed and b"sk-abc" not in scrubbed
    assert scrubbed.count(REDACTED.encode()) == 2


def test_scrub_keeps_json_valid() -> None:
    body = orjson.dumps(
        {"error": {"message": "bad Bearer sk-abcdefghijklmnop1234", "api_key": "0123456789" * 3}}
    )
    assert orjson.loads(scrub_bytes(body))["error"]["api_key"] == REDACTED


HOSTILE = [
    "eyJ-" * 16384,
    "eyJaaaaaaaaaa." * 4681,
    "key:" * 16384,
    "key=" + " " * 65532,
    "sk-" * 21845,
    "sk-aaaaaaaaaa " * 4681,
    "Bearer " * 9362,
    "Bearer " + "\t" * 65529,
    "api_key" * 9362,
    "a" * 65536,
    "0123456789abcdef" * 4096,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:12]))
def test_scrub_runs_over_64_kib_of_hostile_text(text: str) -> None:
    scrubbed = scrub(text, [OWN_SECRET, "x" * 40])
    assert len(scrubbed) <= len(text) + len(REDACTED)


# The connection's own secret as an upstream may echo it: (encoding, the echoed text).
SLASHED = "own/secret+key=0123"  # characters each encoding writes differently
ENCODED_ROWS: list[tuple[str, str]] = [
    ("base64", base64.b64encode(SLASHED.encode()).decode()),
    ("base64 url-safe", base64.urlsafe_b64encode(SLASHED.encode()).decode()),
    ("base64 inside a basic credential", base64.b64encode(f"user:{SLASHED}".encode()).decode()),
    ("base64 at the second alignment", base64.b64encode(f"ab{SLASHED}tail".encode()).decode()),
    ("hex", SLASHED.encode().hex()),
    ("upper-case hex", SLASHED.encode().hex().upper()),
    ("url-encoded", quote(SLASHED, safe="")),
    ("url-encoded, every character", "".join(f"%{b:02X}" for b in SLASHED.encode())),
    ("url-encoded, lower-case escapes", "own%2fsecret%2bkey%3d0123"),
    ("split by a space", "own/secret +key=0123"),
    ("wrapped across lines", "own/secret+\n    key=0123"),
    ("quoted in pieces", '"own/sec" "ret+key=0123"'),
    ("quoted and concatenated", "'own/secret' + 'key=0123'"),
]


@pytest.mark.parametrize(("encoding", "echoed"), ENCODED_ROWS, ids=[r[0] for r in ENCODED_ROWS])
def test_the_own_secret_is_redacted_in_every_encoding(encoding: str, echoed: str) -> None:
    scrubbed = scrub(f"The upstream said: {echoed} (rejected)", [SLASHED])
    assert echoed not in scrubbed
    assert REDACTED in scrubbed
    assert scrubbed.startswith("The upstream said: ") and scrubbed.endswith(" (rejected)")


def test_encoded_forms_leave_unrelated_text_alone() -> None:
    text = "model gpt-4o answered 429; retry after 3 s: " + base64.b64encode(b"x" * 30).decode()
    assert scrub(text, [SLASHED]) == text


def test_a_spread_secret_is_matched_in_linear_time() -> None:
    # Every character of the secret, each followed by a long run of separators, never closed.
    hostile = "".join(c + " " * 400 for c in SLASHED[:-1]) * 8
    started = time.perf_counter()
    scrub(hostile, [SLASHED])
    assert time.perf_counter() - started < 0.5


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("t", logging.WARNING, __file__, 1, msg, args, None)


def test_filter_scrubs_message_and_arguments() -> None:
    record = _record("upstream said %s", "Bearer sk-abcdefghijklmnop1234")
    assert ScrubbingFilter().filter(record) is True
    assert record.getMessage() == f"upstream said Bearer {REDACTED}"


def test_filter_leaves_a_clean_record_untouched() -> None:
    record = _record("request %s: HTTP %d", "abc123", 503)
    ScrubbingFilter().filter(record)
    assert (record.msg, record.args) == ("request %s: HTTP %d", ("abc123", 503))


def test_filter_scrubs_a_logged_exception() -> None:
    try:
        raise ValueError("refused sk-abcdefghijklmnop1234")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    ScrubbingFilter().filter(record)
    text = logging.Formatter().format(record)
    assert "sk-abcdefghijklmnop1234" not in text and REDACTED in text


def test_the_console_handler_carries_the_filter() -> None:
    config: Any = settings.LOGGING
    assert "scrub" in config["handlers"]["console"]["filters"]
    assert config["filters"]["scrub"]["()"] == "omniroute.core.logging.ScrubbingFilter"
