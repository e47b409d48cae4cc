"""Quota snapshots: how much of an upstream account's rate limits is used, and when they reset,
read from the rate-limit headers of its answers (pure).

The quota-driven combo strategies (reset-aware, reset-window, headroom) rank connections by
these snapshots. A snapshot holds named windows, each a used fraction (0..1) and a reset
instant (epoch seconds), plus the overall figures:

* OpenAI style - ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``: windows
  ``requests`` and ``tokens``; the reset is a duration (``1s``, ``6m0s``, ``20ms``,
  ``1h2m3.5s``, or plain seconds) counted from ``now``;
* Anthropic style - ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
  {limit,remaining,reset}`` (the reset an RFC 3339 instant): windows named like the header
  (``requests``, ``tokens``, ``input-tokens``, ``output-tokens``);
* Anthropic unified - ``anthropic-ratelimit-unified-5h-utilization`` / ``-5h-reset`` and
  ``-7d-utilization`` / ``-7d-reset``: windows ``session`` (5 h) and ``weekly`` (7 d); a
  utilization above 1 is a percent; the reset is epoch seconds, epoch milliseconds (above
  1e12) or ISO 8601; ``anthropic-ratelimit-unified-status: rejected`` means the limit is reached.

A window's used fraction is ``1 - remaining / limit``; the snapshot's ``percent_used`` is the
highest of its windows and ``reset_at`` that window's reset; ``limit_reached`` is set when any
``remaining`` is 0. Unparseable values and resets in the past are left out (None), never
raised; fractions are clamped to 0..1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

SESSION = "session"  # the 5-hour window
WEEKLY = "weekly"  # the 7-day window
MONTHLY = "monthly"  # the 30-day window, where an upstream reports one
QUOTA_RECORD_PREFIX = "quota-snapshot:"

_OPENAI_NAME = "x-ratelimit-{field}-{kind}"  # x-ratelimit-remaining-tokens
_OPENAI_KINDS = ("requests", "tokens")
_ANTHROPIC_NAME = "anthropic-ratelimit-{kind}-{field}"  # ...-tokens-remaining
_ANTHROPIC_KINDS = ("requests", "tokens", "input-tokens", "output-tokens")
_UNIFIED = "anthropic-ratelimit-unified-"
_UNIFIED_WINDOWS = (("5h", SESSION), ("7d", WEEKLY))
_EPOCH_MS_ABOVE = 1e12  # a unified reset above this is in milliseconds
_DURATION = re.compile(r"(?:\d+(?:\.\d*)?(?:h|ms|m|s|us|µs|ns))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

# A reset header's parser: (the header's value or None, now) -> epoch seconds or None.
_ResetReader = Callable[[str | None, float], float | None]


def quota_key(connection_id: int) -> str:
    """The state-store key of a connection's latest quota snapshot."""
    return f"{QUOTA_RECORD_PREFIX}{connection_id}"


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """One rate-limit window: the fraction used (0..1) and when it resets (epoch seconds);
    None where the upstream did not say."""

    percent_used: float | None
    reset_at: float | None


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """What an upstream said of one connection's quota at ``taken_at`` (epoch seconds).

    ``percent_used`` and ``reset_at`` are the fullest window's; ``windows`` maps a window name
    (``session``, ``weekly``, ``monthly``, ``requests``, ``tokens``, ...) to its figures and
    is stored as a read-only copy. Hashing ignores the windows."""

    percent_used: float | None
    reset_at: float | None
    limit_reached: bool
    windows: Mapping[str, QuotaWindow] = field(hash=False)
    taken_at: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", MappingProxyType(dict(self.windows)))

    def to_record(self) -> dict[str, Any]:
        """The snapshot as JSON-safe data for the state store (``from_record`` reads it)."""
        windows = {
            name: {"percent_used": w.percent_used, "reset_at": w.reset_at}
            for name, w in self.windows.items()
        }
        return {
            "percent_used": self.percent_used,
            "reset_at": self.reset_at,
            "limit_reached": self.limit_reached,
            "windows": windows,
            "taken_at": self.taken_at,
        }

    def as_of(self, now: float) -> QuotaSnapshot:
        """The snapshot as it stands at ``now`` (epoch seconds): a window whose reset has
        passed is unused again, and the limit stays reached only while a window is full."""
        given = self.windows.items()
        passed = {n for n, w in given if w.reset_at is not None and w.reset_at <= now}
        if not passed:
            return self
        windows = {n: QuotaWindow(0.0, None) if n in passed else w for n, w in given}
        full = any((w.percent_used or 0.0) >= 1.0 for w in windows.values())
        return _snapshot(windows, self.limit_reached and full, self.taken_at)

    @classmethod
    def from_record(cls, record: object) -> QuotaSnapshot | None:
        """A snapshot from stored data, tolerantly: None unless ``record`` is a mapping with a
        numeric ``taken_at``; a bad field reads as unknown, a bad window is dropped, and a
        fraction above 1 is read as a percent."""
        if not isinstance(record, Mapping):
            return None
        taken_at = _number(record.get("taken_at"))
        if taken_at is None:
            return None
        raw_windows = record.get("windows")
        windows = {
            str(name): QuotaWindow(
                used_fraction(raw.get("percent_used")), _number(raw.get("reset_at"))
            )
            for name, raw in (raw_windows.items() if isinstance(raw_windows, Mapping) else ())
            if isinstance(raw, Mapping)
        }
        return cls(
            percent_used=used_fraction(record.get("percent_used")),
            reset_at=_number(record.get("reset_at")),
            limit_reached=record.get("limit_reached") is True,
            windows=windows,
            taken_at=taken_at,
        )


def snapshot_from_headers(headers: Mapping[str, str], now: float) -> QuotaSnapshot | None:
    """The quota an upstream's rate-limit headers describe at ``now`` (epoch seconds), or None
    when they carry none (see the module docstring for the header families)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    windows: dict[str, QuotaWindow] = {}
    exhausted = False
    for template, kinds, read_reset in (
        (_OPENAI_NAME, _OPENAI_KINDS, _duration_reset),
        (_ANTHROPIC_NAME, _ANTHROPIC_KINDS, _iso_reset),
    ):
        for kind in kinds:
            found = _counted_window(lowered, template, kind, read_reset, now)
            if found is not None:
                windows[kind], empty = found
                exhausted = exhausted or empty
    windows.update(_unified_windows(lowered, now))
    rejected = lowered.get(f"{_UNIFIED}status", "").strip().lower() == "rejected"
    if not windows and not rejected:
        return None
    return _snapshot(windows, exhausted or rejected, now)


def _snapshot(windows: Mapping[str, QuotaWindow], limit_reached: bool, now: float) -> QuotaSnapshot:
    """The snapshot of ``windows``: overall figures from the fullest window (the first one
    named, on a tie)."""
    known = [w for w in windows.values() if w.percent_used is not None]
    fullest = max(known, key=lambda w: w.percent_used or 0.0, default=None)
    return QuotaSnapshot(
        percent_used=None if fullest is None else fullest.percent_used,
        reset_at=None if fullest is None else fullest.reset_at,
        limit_reached=limit_reached,
        windows=windows,
        taken_at=now,
    )


def _counted_window(
    headers: Mapping[str, str],
    template: str,
    kind: str,
    read_reset: _ResetReader,
    now: float,
) -> tuple[QuotaWindow, bool] | None:
    """The window of one limit/remaining/reset header triple, and whether nothing remains;
    None when none of the three parses."""
    limit = _number(_strip(headers.get(template.format(field="limit", kind=kind))))
    remaining = _number(_strip(headers.get(template.format(field="remaining", kind=kind))))
    reset_at = read_reset(headers.get(template.format(field="reset", kind=kind)), now)
    if limit is None and remaining is None and reset_at is None:
        return None
    empty = remaining is not None and remaining <= 0
    used: float | None = None
    if limit is not None and limit > 0 and remaining is not None:
        used = _clamp01(1 - remaining / limit)
    elif empty:
        used = 1.0  # nothing left, whatever the limit was
    return QuotaWindow(used, reset_at), empty


def _unified_windows(headers: Mapping[str, str], now: float) -> dict[str, QuotaWindow]:
    """The session (5 h) and weekly (7 d) windows of the Anthropic unified headers."""
    windows = {}
    for span, name in _UNIFIED_WINDOWS:
        used = used_fraction(headers.get(f"{_UNIFIED}{span}-utilization"))
        reset_at = _epoch_or_iso_reset(headers.get(f"{_UNIFIED}{span}-reset"), now)
        if used is not None or reset_at is not None:
            windows[name] = QuotaWindow(used, reset_at)
    return windows


# -- resets ---------------------------------------------------------------------------------------


def _future(instant: float | None, now: float) -> float | None:
    """``instant`` unless unknown, non-finite or in the past."""
    if instant is None or not math.isfinite(instant) or instant < now:
        return None
    return instant


def _duration_reset(value: str | None, now: float) -> float | None:
    """An OpenAI reset: a Go-style duration (``6m0s``, ``20ms``) or plain seconds from now."""
    text = _strip(value)
    if text is None:
        return None
    seconds = _number(text)
    if seconds is None and _DURATION.fullmatch(text):
        parts = _DURATION_PART.findall(text)
        seconds = math.fsum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return _future(now + seconds, now)


def _iso_reset(value: str | None, now: float) -> float | None:
    """An Anthropic reset: an RFC 3339 instant (no offset: UTC)."""
    return _future(_iso_instant(_strip(value)), now)


def _epoch_or_iso_reset(value: str | None, now: float) -> float | None:
    """A unified reset: epoch seconds, epoch milliseconds (above 1e12) or ISO 8601."""
    text = _strip(value)
    number = _number(text)
    if number is not None:
        return _future(number / 1000 if number > _EPOCH_MS_ABOVE else number, now)
    return _future(_iso_instant(text), now)


def _iso_instant(text: str | None) -> float | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError):
        return None


# -- numbers --------------------------------------------------------------------------------------


def _strip(value: str | None) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _number(value: object) -> float | None:
    """A finite number from a number or a numeric string, else None (booleans are not)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # OverflowError: an integer too large for a float
        return None
    return number if math.isfinite(number) else None


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


def used_fraction(value: object) -> float | None:
    """A used fraction from a number or numeric string: above 1 it is a percent (80 -> 0.8);
    clamped to 0..1; None when it is not a finite number."""
    number = _number(value)
    if number is None:
        return None
    return _clamp01(number / 100 if number > 1 else number)
