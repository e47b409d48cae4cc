"""Helpers shared by the store backends: JSON codec (``orjson`` when available), checks."""

from __future__ import annotations

from typing import cast

from .base import Json

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

import json


def encode(value: Json) -> bytes:
    """Serialise ``value`` to compact JSON bytes; raises ``TypeError`` if it is not JSON."""
    if orjson is not None:
        return orjson.dumps(value)
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def decode(raw: bytes | str) -> Json:
    """Parse JSON produced by ``encode``."""
    if orjson is not None:
        return cast(Json, orjson.loads(raw))
    return cast(Json, json.loads(raw))


def as_counter(value: Json | None) -> int:
    """Return ``value`` as a counter (``None`` is 0); ``TypeError`` if it is not an int."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"record is not an integer counter: {value!r}")
    return value


def check_window_args(window: float, amount: int = 1) -> None:
    """Reject non-positive windows and amounts that are not positive integers."""
    if not window > 0:
        raise ValueError(f"window must be positive, got {window!r}")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
        raise ValueError(f"window amount must be a positive int, got {amount!r}")
