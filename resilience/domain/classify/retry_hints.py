"""Upstream retry hints: how long the provider asked us to wait, pure.

Stdlib only. ``now`` is epoch seconds; ``tz`` is the gateway's local zone, used for timestamps
written without an offset and for local midnight. Results are whole milliseconds.

Sources, in the order :func:`detect_retry_hint` tries them:

1. Headers (provenance ``header``): ``Retry-After`` as integer seconds (only when the whole
   value is the integer) or an HTTP date; else ``X-RateLimit-Reset`` as an epoch, in
   milliseconds above 10 000 000 000 and in seconds otherwise. The first of the two headers
   that parses decides; a reset in the past gives no hint.
2. The JSON body: Google ``RetryInfo.retryDelay`` (``google_rpc_retry_info``), then
   ``resets_at``, ``retryAfter``/``retry_after``, ``retry_after_ms``/``retryAfterMs`` (``body``).
3. The text (``body``): "please retry in N.Ns"; an ISO timestamp after "try again at",
   "wait until", "reset(s) at", "available at" or "retry after"; "(will) reset(s) after
   XhYmZs"; "reset(s) in XhYmZs"; "reset(s) in N day(s)".

Every hint is capped at 30 days; the short per-request hints ("please retry in", RetryInfo)
at 24 hours.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

DAY_MS = 86_400_000
MAX_HINT_MS = 30 * DAY_MS
MAX_SHORT_HINT_MS = DAY_MS
EPOCH_MS_THRESHOLD = 10_000_000_000  # an X-RateLimit-Reset above this is in milliseconds
_EPOCH_SECONDS_LIMIT = 1e12  # a body's resets_at below this is in seconds
_DST_SLACK_MS = 25 * 3_600_000
# Absurd upstream numbers are clamped before any float conversion (no OverflowError).
_MAX_HINT_SECONDS = MAX_HINT_MS // 1000 + 1
_MAX_EPOCH_MS = 10**15

_INTEGER = re.compile(r"\d+")
_LEADING_INTEGER = re.compile(r"\s*(\d+)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DELAY = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h)?", re.IGNORECASE)
_UNIT_MS = {"ms": 1.0, "s": 1_000.0, "m": 60_000.0, "h": 3_600_000.0}

_PLEASE_RETRY = re.compile(r"please retry in\s+(\d+(?:\.\d+)?\s*s)", re.IGNORECASE)
_PLEASE_RETRY_SECONDS = re.compile(r"please retry in (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)
_ISO_AFTER_PHRASE = re.compile(
    r"\b(?:try again at|wait until|resets? at|available at|retry after)\s+"
    r"(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|z|[+-]\d{2}:?\d{2})?)",
    re.IGNORECASE,
)
# "will reset after 2h" is caught by the first one too ("reset after" is inside it).
_HMS = r"(?:(\d+)h)?\s?(?:(\d+)m(?!s))?\s?(?:(\d+)s)?"
_RESETS_AFTER = re.compile(r"resets? after " + _HMS, re.IGNORECASE)
_RESETS_IN = re.compile(r"resets? in " + _HMS, re.IGNORECASE)
_RESETS_IN_DAYS = re.compile(r"resets?\s+in\s+(\d+)\s*days?", re.IGNORECASE)
_ISO_FRACTION = re.compile(r"(\.\d{1,6})\d*")


class HintSource(StrEnum):
    """Where a retry hint came from; header and RetryInfo hints are authoritative resets."""

    HEADER = "header"
    GOOGLE_RPC_RETRY_INFO = "google_rpc_retry_info"
    BODY = "body"


@dataclass(frozen=True, slots=True)
class RetryHint:
    """A positive wait in milliseconds and its provenance."""

    ms: int
    source: HintSource


# -- entry points ---------------------------------------------------------------------------------


def detect_retry_hint(
    headers: Mapping[str, str], text: str, *, now: float, tz: tzinfo
) -> RetryHint | None:
    """The first hint of headers, JSON body, then text (see the module docstring)."""
    header_ms = ms_until(reset_at_from_headers(headers, now=now, tz=tz), now)
    if header_ms is not None:
        return RetryHint(header_ms, HintSource.HEADER)
    body_hint = json_body_hint(text, now=now, tz=tz)
    if body_hint is not None:
        return body_hint
    text_ms = _text_forms_ms(text, now=now, tz=tz)
    return RetryHint(text_ms, HintSource.BODY) if text_ms is not None else None


def reset_at_from_headers(headers: Mapping[str, str], *, now: float, tz: tzinfo) -> float | None:
    """The reset instant (epoch seconds) the headers announce, past or future, or None."""
    retry_after = header_value(headers, "retry-after")
    if retry_after:
        reset_at = _retry_after_instant(retry_after, now=now, tz=tz)
        if reset_at is not None:
            return reset_at
    reset = header_value(headers, "x-ratelimit-reset")
    found = _LEADING_INTEGER.match(reset) if reset else None
    if found is None:
        return None
    value = min(count_of(found.group(1)), _MAX_EPOCH_MS)
    return value / 1000 if value > EPOCH_MS_THRESHOLD else float(value)


def json_body_hint(text: str, *, now: float, tz: tzinfo) -> RetryHint | None:
    """A hint from the JSON error body (Google RetryInfo first), or None."""
    root = _json_object(text)
    if root is None:
        return None
    error = root.get("error")
    nested: Mapping[str, Any] = error if isinstance(error, dict) else {}
    retry_info = _retry_info_ms(_first(nested.get("details"), root.get("details")))
    if retry_info is not None:
        return RetryHint(retry_info, HintSource.GOOGLE_RPC_RETRY_INFO)
    for read in _BODY_FIELDS:
        ms = read(nested, root, now, tz)
        if ms is not None:
            return RetryHint(ms, HintSource.BODY)
    return None


def text_hint_ms(text: str, *, now: float, tz: tzinfo) -> int | None:
    """A wait parsed from the error text (the JSON body first), or None."""
    body_hint = json_body_hint(text, now=now, tz=tz)
    return body_hint.ms if body_hint is not None else _text_forms_ms(text, now=now, tz=tz)


def parse_delay_ms(value: object) -> int | None:
    """Milliseconds of a delay: "33s", "1.5s", "1500ms", "2m", "1h" or bare seconds."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):  # clamped: a 400-digit delay must not overflow a float later
        return min(value, _MAX_HINT_SECONDS) * 1000
    if isinstance(value, float):  # 1e306 s is finite, but not in milliseconds
        ms = value * 1000
        return round(ms) if math.isfinite(ms) else None
    found = _DELAY.fullmatch(str(value).strip())
    if found is None:
        return None
    ms = float(found.group(1)) * _UNIT_MS[(found.group(2) or "s").lower()]
    return round(ms) if math.isfinite(ms) else None


def declared_retry_delay_seconds(text: str) -> float | None:
    """The short throttle window a 429 declares: "please retry in N s" or Google RetryInfo."""
    phrase = _PLEASE_RETRY_SECONDS.search(text)
    if phrase:
        return float(phrase.group(1))
    root = _json_object(text)
    if root is None:
        return None
    error = root.get("error")
    nested: Mapping[str, Any] = error if isinstance(error, dict) else {}
    for detail in _details(_first(nested.get("details"), root.get("details"))):
        ms = parse_delay_ms(detail.get("retryDelay"))
        if ms is not None and ms >= 0:
            return ms / 1000
    return None


def ms_until_next_local_midnight(*, now: float, tz: tzinfo) -> int:
    """Milliseconds until the next 00:00 in ``tz`` (24 h if the arithmetic looks off)."""
    today = datetime.fromtimestamp(now, tz).date()
    return _ms_until_local(today + timedelta(days=1), time(0), now=now, tz=tz)


def ms_until_next_local_hour(hour: int, *, now: float, tz: tzinfo) -> int:
    """Milliseconds until the next ``hour``:00 in ``tz``, strictly after ``now``."""
    today = datetime.fromtimestamp(now, tz).date()
    at = datetime.combine(today, time(hour), tzinfo=tz).timestamp()
    day = today if at > now else today + timedelta(days=1)
    return _ms_until_local(day, time(hour), now=now, tz=tz)


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name, ignoring case (callers usually pass lower-cased names already)."""
    if name in headers:
        return headers[name]
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), None)


# -- headers ---------------------------------------------------------------------------------------


def _retry_after_instant(value: str, *, now: float, tz: tzinfo) -> float | None:
    stripped = value.strip()
    if _INTEGER.fullmatch(stripped):
        return now + min(count_of(stripped), _MAX_HINT_SECONDS)
    instant = _http_date(stripped)
    return instant if instant is not None else _iso_instant(stripped, tz)


def _http_date(value: str) -> float | None:
    try:
        parsed = parsedate_to_datetime(value)
        if parsed.tzinfo is None:  # "-0000": HTTP dates are GMT
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


# -- JSON body -------------------------------------------------------------------------------------


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip() if text else ""
    if not stripped.startswith("{"):
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):  # RecursionError: hostile nesting depth
        return None
    return parsed if isinstance(parsed, dict) and parsed else None


def _first(*values: object) -> object:
    return next((value for value in values if value is not None), None)


def _details(value: object) -> list[dict[str, Any]]:
    """The ``google.rpc.RetryInfo`` entries of an error's ``details`` list."""
    items = value if isinstance(value, list) else []
    return [
        item
        for item in items
        if isinstance(item, dict) and "RetryInfo" in str(item.get("@type", ""))
    ]


def _retry_info_ms(details: object) -> int | None:
    for detail in _details(details):
        ms = parse_delay_ms(detail.get("retryDelay"))
        if ms is not None and ms > 0:
            return min(ms, MAX_SHORT_HINT_MS)
    return None


_Field = Callable[[Mapping[str, Any], Mapping[str, Any], float, tzinfo], int | None]


def _field(nested: Mapping[str, Any], root: Mapping[str, Any], *names: str) -> object:
    return _first(*(source.get(name) for name in names for source in (nested, root)))


def _resets_at_ms(
    nested: Mapping[str, Any], root: Mapping[str, Any], now: float, tz: tzinfo
) -> int | None:
    value = _field(nested, root, "resets_at", "resetsAt")
    number = _as_number(value)
    if number is not None:
        seconds = number if number < _EPOCH_SECONDS_LIMIT else number / 1000
        return ms_until(seconds, now)
    return ms_until(_iso_instant(value, tz), now)


def _retry_after_field_ms(
    nested: Mapping[str, Any], root: Mapping[str, Any], now: float, tz: tzinfo
) -> int | None:
    value = _field(nested, root, "retryAfter", "retry_after")
    number = _as_number(value)
    if number is not None:
        return _positive_ms(number * 1000)
    return ms_until(_iso_instant(value, tz), now)


def _retry_after_ms_field(
    nested: Mapping[str, Any], root: Mapping[str, Any], now: float, tz: tzinfo
) -> int | None:
    return _positive_ms(_as_number(_field(nested, root, "retry_after_ms", "retryAfterMs")))


_BODY_FIELDS: tuple[_Field, ...] = (_resets_at_ms, _retry_after_field_ms, _retry_after_ms_field)


def _as_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    if isinstance(value, int):  # JSON integers may have hundreds of digits, either sign
        return float(max(-_MAX_EPOCH_MS, min(value, _MAX_EPOCH_MS)))
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


# -- text ------------------------------------------------------------------------------------------


def _text_forms_ms(text: str, *, now: float, tz: tzinfo) -> int | None:
    """The first of the prose forms (not the JSON body) that gives a positive wait."""
    for parse in (_please_retry_ms, _iso_phrase_ms, _countdown_ms, _days_ms):
        ms = parse(text, now, tz) if text else None
        if ms is not None:
            return ms
    return None


def _please_retry_ms(text: str, now: float, tz: tzinfo) -> int | None:
    found = _PLEASE_RETRY.search(text)
    ms = parse_delay_ms(found.group(1)) if found else None
    return min(ms, MAX_SHORT_HINT_MS) if ms else None


def _iso_phrase_ms(text: str, now: float, tz: tzinfo) -> int | None:
    found = _ISO_AFTER_PHRASE.search(text)
    return ms_until(_iso_instant(found.group(1), tz), now) if found else None


def _countdown_ms(text: str, now: float, tz: tzinfo) -> int | None:
    for pattern in (_RESETS_AFTER, _RESETS_IN):
        found = pattern.search(text)
        if found and any(found.groups()):
            hours, minutes, seconds = (count_of(group or "0") for group in found.groups())
            return _positive_ms((hours * 3600 + minutes * 60 + seconds) * 1000)
    return None


def _days_ms(text: str, now: float, tz: tzinfo) -> int | None:
    found = _RESETS_IN_DAYS.search(text)
    return _positive_ms(count_of(found.group(1)) * DAY_MS) if found else None


# -- instants and caps ----------------------------------------------------------------------------


def _iso_instant(value: object, tz: tzinfo) -> float | None:
    """An ISO 8601 timestamp as epoch seconds; no offset means local time in ``tz``."""
    if not isinstance(value, str) or not value.strip():
        return None
    normalised = _ISO_FRACTION.sub(r"\1", value.strip(), count=1)
    try:
        parsed = datetime.fromisoformat(normalised)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)).timestamp()
    except (ValueError, OverflowError):
        return None


def ms_until(instant: float | None, now: float) -> int | None:
    """Whole milliseconds from ``now`` to ``instant`` if in the future (capped at 30 days)."""
    return None if instant is None else _positive_ms((instant - now) * 1000)


def _positive_ms(value: float | None) -> int | None:
    """A positive wait capped at 30 days; ints may be huge (no float conversion)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    ms = value if isinstance(value, int) or value is None else round(value)
    return min(ms, MAX_HINT_MS) if ms is not None and ms > 0 else None


def _ms_until_local(day: date, at: time, *, now: float, tz: tzinfo) -> int:
    target = datetime.combine(day, at, tzinfo=tz).timestamp()
    ms = round((target - now) * 1000)
    return ms if 0 < ms <= _DST_SLACK_MS else DAY_MS


def count_of(digits: str) -> int:
    """A run of digits (an upstream's countdown, a header's seconds) as an integer, saturated
    at 10**18: past that it is past every cap, and ``int()`` refuses a text of over 4 300
    digits, which an upstream may write."""
    return int(digits) if len(digits) <= 18 else 10**18
