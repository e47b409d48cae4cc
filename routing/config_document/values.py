"""The kinds of value a document holds, and how each is checked and written canonically (pure).

Every value is normalised the same way whether it comes from a file, a JSON body or the
database, so comparing two documents is comparing plain data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

PRICE_QUANTUM = Decimal("0.0001")  # the catalog's prices keep four decimal places

Normalize = Callable[[Any], Any]


def text(raw: Any) -> str:
    """A string the database can store: no NUL, no lone surrogate (which no encoding writes)."""
    if not isinstance(raw, str):
        raise ValueError("must be a string")
    if "\x00" in raw or not _encodable(raw):
        raise ValueError("must be text without a NUL or a lone surrogate")
    return raw


def _encodable(raw: str) -> bool:
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def required_text(raw: Any) -> str:
    """A non-empty string (a natural key)."""
    if not text(raw).strip():
        raise ValueError("must not be empty")
    return str(raw)


def optional_text(raw: Any) -> str | None:
    """A string or null."""
    return None if raw is None else text(raw)


def boolean(raw: Any) -> bool:
    """``true`` or ``false``."""
    if not isinstance(raw, bool):
        raise ValueError("must be true or false")
    return raw


def optional_boolean(raw: Any) -> bool | None:
    """``true``, ``false`` or null (unknown)."""
    return None if raw is None else boolean(raw)


def integer(raw: Any) -> int:
    """A whole number (``5.0`` is 5)."""
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError("must be a whole number")
    return raw


def optional_integer(raw: Any) -> int | None:
    """A whole number or null."""
    return None if raw is None else integer(raw)


def text_list(raw: Any) -> list[str]:
    """A list of strings."""
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ValueError("must be a list of strings")
    return list(raw)


def integer_list(raw: Any) -> list[int]:
    """A list of whole numbers."""
    if not isinstance(raw, list):
        raise ValueError("must be a list of whole numbers")
    try:
        return [integer(item) for item in raw]
    except ValueError:
        raise ValueError("must be a list of whole numbers") from None


def mapping(raw: Any) -> dict[str, Any]:
    """A free-form mapping, its keys sorted at every level (so it always dumps the same)."""
    if not isinstance(raw, Mapping) or not all(isinstance(key, str) for key in raw):
        raise ValueError("must be a mapping with string keys")
    return {key: _sorted(raw[key]) for key in sorted(raw)}


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _sorted(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    # What JSON holds, and nothing else: YAML would also give dates, and floats JSON lacks.
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("holds a number JSON cannot store (NaN or infinity)")
    if value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"holds a {type(value).__name__}: use a string, number, list or mapping")
    return value


def price(raw: Any) -> str | None:
    """A price in USD per million tokens as a decimal string with four places, or null."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float | str | Decimal):
        raise ValueError("must be a decimal number or null")
    try:
        return str(Decimal(str(raw)).quantize(PRICE_QUANTUM))
    except InvalidOperation:
        raise ValueError("must be a decimal number or null") from None


def moment(raw: Any) -> str | None:
    """A date and time with its zone, written in UTC (``2027-01-31T00:00:00Z``), or null."""
    if raw is None:
        return None
    when = _parse_moment(raw)
    if when.tzinfo is None:
        raise ValueError("needs a time zone (for example 2027-01-31T00:00:00Z)")
    try:
        utc = when.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the last UTC day
        raise ValueError("is out of range (years 1 to 9999 in UTC)") from None
    return utc.isoformat().replace("+00:00", "Z")


def _parse_moment(raw: Any) -> datetime:
    if isinstance(raw, datetime):
        return raw
    try:
        return datetime.fromisoformat(text(raw))
    except ValueError:
        raise ValueError("must be a date and time (for example 2027-01-31T00:00:00Z)") from None


def moment_value(written: str | None) -> datetime | None:
    """The aware datetime of a value ``moment`` wrote."""
    return None if written is None else datetime.fromisoformat(written)
